import { createHash } from "node:crypto";
import { open } from "node:fs/promises";

/** What a saved sequence state depends on beyond its tokens. */
export interface KvStateSettings {
  readonly modelPath: string;
  /** llama.cpp's version and commit: the state format is theirs */
  readonly llamaBuild: string;
  readonly kvCacheType: string;
  readonly flashAttn: boolean;
  readonly kvLayout: string;
  readonly blockSizeTokens: number;
  /** anything else the states are valid for only (serve: its API keys, whose order names the tenants) */
  readonly scope: string;
}

const SAMPLES = 16;
const SAMPLE_BYTES = 64 * 1024;

/**
 * A fingerprint of the settings a saved KV state is valid for: a state restored into other weights would
 * decode from the wrong keys and values without any error, so the model file is recognised by its size and
 * a hash of 16 slices spread over it (1 MiB read, however large the file: two fine-tunes of one base differ
 * in every tensor, and so in these slices), beside llama.cpp's build and the KV cache's type and layout.
 */
export async function kvStateIdentity(settings: KvStateSettings): Promise<string> {
  const hash = createHash("sha256");
  const file = await open(settings.modelPath, "r");
  try {
    const { size } = await file.stat();
    hash.update(`${size}\n`);
    const buffer = Buffer.alloc(SAMPLE_BYTES);
    for (let i = 0; i < SAMPLES; i++) {
      const position = Math.floor(((size - SAMPLE_BYTES) * i) / (SAMPLES - 1));
      const { bytesRead } = await file.read(buffer, 0, SAMPLE_BYTES, Math.max(0, position));
      hash.update(buffer.subarray(0, bytesRead));
    }
  } finally {
    await file.close();
  }
  const { modelPath: _path, ...rest } = settings;
  hash.update(JSON.stringify(rest));
  return hash.digest("hex");
}
