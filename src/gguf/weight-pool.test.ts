import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../core/rng.js";
import { GgmlType } from "./format/gguf-types.js";
import { float16BitsToFloat32 } from "./format/gguf-writer.js";
import { WeightPool } from "./weight-pool.js";

/** `n` seeded N(0, std) values. */
function normals(n: number, std: number, seed = 1): Float32Array {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n }, () => rng.normal(0, std));
}

function readStream(pool: WeightPool, seed: number, bytes: number, callBytes: number): Buffer {
  const read = pool.stream(new Rng(seed));
  const out = Buffer.alloc(bytes);
  for (let at = 0; at < bytes; at += callBytes) read(out.subarray(at, Math.min(bytes, at + callBytes)));
  return out;
}

function f16Values(buf: Buffer): Float32Array {
  return Float32Array.from({ length: buf.length / 2 }, (_, i) =>
    float16BitsToFloat32(buf.readUInt16LE(2 * i)),
  );
}

describe("WeightPool", () => {
  const pool = new WeightPool(GgmlType.F16, normals(1 << 16, 0.02));

  it("streams the same bytes for a seed however the reads are split, other bytes for another seed", () => {
    const whole = readStream(pool, 7, 1 << 20, 1 << 20);
    assert.ok(whole.equals(readStream(pool, 7, 1 << 20, 64 * 1000)));
    assert.ok(whole.equals(readStream(pool, 7, 1 << 20, 6)));
    assert.ok(!whole.equals(readStream(pool, 8, 1 << 20, 1 << 20)));
  });

  it("keeps the pool's distribution, and rows of a matrix are not copies of each other", () => {
    const rows = 512;
    const rowLength = 4096;
    const values = f16Values(readStream(pool, 3, rows * rowLength * 2, 1 << 20));
    let sq = 0;
    for (const v of values) sq += v * v;
    assert.ok(Math.abs(Math.sqrt(sq / values.length) - 0.02) < 0.001);
    const distinct = new Set<string>();
    for (let r = 0; r < rows; r++) distinct.add(values.subarray(r * rowLength, (r + 1) * rowLength).join());
    assert.equal(distinct.size, rows);
  });

  it("streams whole Q8_0 blocks", () => {
    const q8 = new WeightPool(GgmlType.Q8_0, normals(1 << 16, 0.5));
    const block = 34;
    const data = readStream(q8, 5, 1000 * block, 7 * block);
    for (let b = 0; b < 1000; b++) {
      const scale = float16BitsToFloat32(data.readUInt16LE(b * block));
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(data.readInt8(b * block + 2 + j)));
      // every block is a quantized N(0, 0.5) block: a positive scale and a largest quant of 127
      assert.ok(scale > 0.002 && scale < 0.05, `block ${b} scale ${scale}`);
      assert.equal(amax, 127);
    }
  });
});
