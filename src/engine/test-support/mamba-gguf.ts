/** A tiny Mamba (state-space, recurrent) GGUF, for tests of what the engine does with recurrent models. */
import { Rng } from "../../core/rng.js";
import { GgmlType } from "../../gguf/format/gguf-types.js";
import { GgufWriter } from "../../gguf/format/gguf-writer.js";
import { writeSpmTokenizer } from "../../gguf/llama-model.js";

const VOCAB = 4096;

/** Writes a 2-layer Mamba model llama.cpp loads (expansion factor 2, as it requires) to `path`. */
export async function writeTinyMambaGguf(path: string): Promise<void> {
  const d = 64;
  const inner = 2 * d;
  const state = 8;
  const conv = 4;
  const dtRank = 4;
  const layers = 2;
  const w = new GgufWriter();
  w.setString("general.architecture", "mamba");
  w.setString("general.name", "tiny-mamba");
  w.setUint32("mamba.context_length", 4096);
  w.setUint32("mamba.embedding_length", d);
  w.setUint32("mamba.block_count", layers);
  w.setUint32("mamba.feed_forward_length", 0);
  w.setUint32("mamba.attention.head_count", 0);
  w.setFloat32("mamba.attention.layer_norm_rms_epsilon", 1e-5);
  w.setUint32("mamba.ssm.conv_kernel", conv);
  w.setUint32("mamba.ssm.inner_size", inner);
  w.setUint32("mamba.ssm.state_size", state);
  w.setUint32("mamba.ssm.time_step_rank", dtRank);
  writeSpmTokenizer(w, VOCAB);
  const rng = new Rng(3);
  const uniform = (scale: number) => (out: Float32Array) => {
    for (let i = 0; i < out.length; i++) out[i] = (rng.next() - 0.5) * scale;
  };
  const ones = (out: Float32Array) => out.fill(1);
  const tensor = (name: string, dims: number[], fill: (out: Float32Array) => void) =>
    w.addTensor({ name, dims, type: GgmlType.F32, fill });
  tensor("token_embd.weight", [d, VOCAB], uniform(0.1));
  tensor("output_norm.weight", [d], ones);
  for (let i = 0; i < layers; i++) {
    tensor(`blk.${i}.attn_norm.weight`, [d], ones);
    tensor(`blk.${i}.ssm_in.weight`, [d, 2 * inner], uniform(0.1));
    tensor(`blk.${i}.ssm_conv1d.weight`, [conv, inner], uniform(0.1));
    tensor(`blk.${i}.ssm_conv1d.bias`, [inner], uniform(0.01));
    tensor(`blk.${i}.ssm_x.weight`, [inner, dtRank + 2 * state], uniform(0.1));
    tensor(`blk.${i}.ssm_dt.weight`, [dtRank, inner], uniform(0.1));
    tensor(`blk.${i}.ssm_dt.bias`, [inner], uniform(0.01));
    tensor(`blk.${i}.ssm_a`, [state, inner], (out) => out.fill(-1));
    tensor(`blk.${i}.ssm_d`, [inner], ones);
    tensor(`blk.${i}.ssm_out.weight`, [inner, d], uniform(0.1));
  }
  await w.writeFile(path);
}
