import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { metaArray, metaNumber, metaString, parseGgufHeader, readGgufInfo } from "./gguf-reader.js";
import { GgmlType, GgufValueType, tensorByteSize } from "./gguf-types.js";
import {
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  GgufWriter,
} from "./gguf-writer.js";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "continuum-gguf-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Values v(i) = sin(i) * scale, so tests can recompute any element. */
function ramp(scale: number) {
  return (out: Float32Array, start: number) => {
    for (let i = 0; i < out.length; i++) out[i] = Math.sin(start + i) * scale;
  };
}

describe("float16 conversion", () => {
  it("converts exact values, rounds to nearest even, handles specials", () => {
    assert.equal(float32ToFloat16Bits(0), 0);
    assert.equal(float32ToFloat16Bits(-0), 0x8000);
    assert.equal(float32ToFloat16Bits(1), 0x3c00);
    assert.equal(float32ToFloat16Bits(-2), 0xc000);
    assert.equal(float32ToFloat16Bits(65504), 0x7bff);
    assert.equal(float32ToFloat16Bits(65520), 0x7c00); // rounds up to infinity
    assert.equal(float32ToFloat16Bits(1e6), 0x7c00);
    assert.equal(float32ToFloat16Bits(Number.NEGATIVE_INFINITY), 0xfc00);
    assert.equal(float32ToFloat16Bits(Number.NaN) & 0x7c00, 0x7c00);
    assert.ok((float32ToFloat16Bits(Number.NaN) & 0x3ff) !== 0);
    assert.equal(float32ToFloat16Bits(2 ** -24), 0x0001); // smallest subnormal
    assert.equal(float32ToFloat16Bits(2 ** -26), 0); // below half of it
    // 1 + 2^-11 is exactly between 1 and 1 + 2^-10: ties to even (1)
    assert.equal(float32ToFloat16Bits(1 + 2 ** -11), 0x3c00);
    assert.equal(float32ToFloat16Bits(1 + 3 * 2 ** -11), 0x3c02);
    for (const v of [0.1, -0.02, 3.25159, 1e-5, 123.456]) {
      const back = float16BitsToFloat32(float32ToFloat16Bits(v));
      assert.ok(Math.abs(back - v) <= Math.max(Math.abs(v) * 2 ** -11, 2 ** -25), `${v} -> ${back}`);
    }
  });
});

describe("bfloat16 conversion", () => {
  it("keeps binary32's exponent, rounds the mantissa to nearest even, keeps NaN a NaN", () => {
    assert.equal(float32ToBfloat16Bits(0), 0);
    assert.equal(float32ToBfloat16Bits(-0), 0x8000);
    assert.equal(float32ToBfloat16Bits(1), 0x3f80);
    assert.equal(float32ToBfloat16Bits(-2), 0xc000);
    assert.equal(float32ToBfloat16Bits(1e30), 0x714a); // 0x7149f2ca rounds up; far past f16's range
    assert.equal(float32ToBfloat16Bits(Number.NEGATIVE_INFINITY), 0xff80);
    assert.equal(float32ToBfloat16Bits(Number.NaN) & 0x7f80, 0x7f80);
    assert.ok((float32ToBfloat16Bits(Number.NaN) & 0x7f) !== 0);
    // 1 + 2^-8 is exactly between 1 and 1 + 2^-7: ties to even (1); 1 + 3 * 2^-8 ties up to 1 + 2^-6
    assert.equal(float32ToBfloat16Bits(1 + 2 ** -8), 0x3f80);
    assert.equal(float32ToBfloat16Bits(1 + 3 * 2 ** -8), 0x3f82);
    assert.equal(float32ToBfloat16Bits(3.4028234663852886e38), 0x7f80); // the largest float rounds to infinity
  });
});

describe("GgufWriter / readGgufInfo round trip", () => {
  it("writes typed metadata and aligned tensors that read back identically", async () => {
    const path = join(dir, "roundtrip.gguf");
    const w = new GgufWriter();
    w.setString("general.architecture", "test")
      .setUint32("t.u32", 4000000000)
      .setInt32("t.i32", -123456)
      .setFloat32("t.f32", 0.5)
      .setBool("t.true", true)
      .setBool("t.false", false)
      .setString("t.str", "héllo ▁ <|im_start|>\n")
      .setString("t.empty", "")
      .setUint64("t.u64", 2n ** 40n)
      .setStringArray("t.strs", ["a", "", "▁b", "<0x0A>"])
      .setFloat32Array("t.f32s", [1.5, -2.25, 0])
      .setInt32Array("t.i32s", [1, -1, 2147483647]);
    w.addTensor({ name: "odd.f32", dims: [3, 5], type: GgmlType.F32, fill: ramp(1) });
    w.addTensor({ name: "vec.f16", dims: [7], type: GgmlType.F16, fill: ramp(2) });
    w.addTensor({ name: "mat.q8", dims: [64, 3], type: GgmlType.Q8_0, fill: ramp(0.1) });
    w.addTensor({ name: "big.f32", dims: [256, 300], type: GgmlType.F32, fill: ramp(1) }); // > one chunk
    const layout = await w.writeFile(path);
    assert.deepEqual(layout, w.layout());

    const info = await readGgufInfo(path);
    assert.equal(info.version, 3);
    assert.equal(info.alignment, 32);
    assert.equal(metaNumber(info, "general.alignment"), 32);
    assert.equal(metaString(info, "general.architecture"), "test");
    assert.equal(metaNumber(info, "t.u32"), 4000000000);
    assert.equal(metaNumber(info, "t.i32"), -123456);
    assert.equal(metaNumber(info, "t.f32"), 0.5);
    assert.deepEqual(info.metadata.get("t.true"), { type: GgufValueType.BOOL, value: true });
    assert.deepEqual(info.metadata.get("t.false"), { type: GgufValueType.BOOL, value: false });
    assert.equal(metaString(info, "t.str"), "héllo ▁ <|im_start|>\n");
    assert.equal(metaString(info, "t.empty"), "");
    assert.deepEqual(info.metadata.get("t.u64"), { type: GgufValueType.UINT64, value: 2n ** 40n });
    assert.deepEqual(info.metadata.get("t.strs"), {
      type: GgufValueType.ARRAY,
      itemType: GgufValueType.STRING,
      value: ["a", "", "▁b", "<0x0A>"],
    });
    assert.deepEqual(metaArray(info, "t.f32s"), [1.5, -2.25, 0]);
    assert.deepEqual(info.metadata.get("t.i32s"), {
      type: GgufValueType.ARRAY,
      itemType: GgufValueType.INT32,
      value: [1, -1, 2147483647],
    });
    assert.deepEqual([...info.metadata.keys()].slice(0, 2), ["general.alignment", "general.architecture"]);

    // tensor infos: names, dims, types, offsets consecutive with 32-byte padding
    assert.deepEqual(
      info.tensors.map((t) => [t.name, t.dims, t.type, t.size]),
      [
        ["odd.f32", [3, 5], GgmlType.F32, 60],
        ["vec.f16", [7], GgmlType.F16, 14],
        ["mat.q8", [64, 3], GgmlType.Q8_0, 6 * 34],
        ["big.f32", [256, 300], GgmlType.F32, 256 * 300 * 4],
      ],
    );
    let expected = 0;
    for (const t of info.tensors) {
      assert.equal(t.offset, expected, t.name);
      assert.equal(t.offset % 32, 0);
      expected = Math.ceil((t.offset + t.size) / 32) * 32;
    }
    assert.equal(info.dataOffset % 32, 0);
    assert.equal(info.dataOffset, layout.dataOffset);
    const fileSize = (await stat(path)).size;
    assert.equal(fileSize, info.dataOffset + expected);
    assert.equal(fileSize, layout.fileSize);
    assert.equal(info.fileSize, fileSize);

    // tensor data
    const bytes = await readFile(path);
    const at = (name: string) => info.dataOffset + info.tensors.find((t) => t.name === name)!.offset;
    for (let i = 0; i < 15; i++) {
      assert.equal(bytes.readFloatLE(at("odd.f32") + 4 * i), Math.fround(Math.sin(i)));
    }
    for (const i of [0, 65535, 65536, 76799]) {
      assert.equal(bytes.readFloatLE(at("big.f32") + 4 * i), Math.fround(Math.sin(i)));
    }
    for (let i = 0; i < 7; i++) {
      const v = float16BitsToFloat32(bytes.readUInt16LE(at("vec.f16") + 2 * i));
      assert.ok(Math.abs(v - 2 * Math.sin(i)) < 2e-3);
    }
    for (let b = 0; b < 6; b++) {
      const base = at("mat.q8") + 34 * b;
      const d = float16BitsToFloat32(bytes.readUInt16LE(base));
      let amax = 0;
      for (let j = 0; j < 32; j++) {
        const x = 0.1 * Math.sin(b * 32 + j);
        amax = Math.max(amax, Math.abs(x));
        const q = bytes.readInt8(base + 2 + j);
        assert.ok(Math.abs(q) <= 127);
        assert.ok(Math.abs(d * q - x) <= d * 0.51 + 1e-4, `block ${b} elem ${j}`);
      }
      assert.ok(Math.abs(d - amax / 127) < 1e-6);
    }
    // padding bytes between tensors are zero
    const vecEnd = at("vec.f16") + 14;
    assert.ok(bytes.subarray(vecEnd, at("mat.q8")).every((x) => x === 0));
  });

  it("grows its read window for headers larger than 1 MiB", async () => {
    const path = join(dir, "bighead.gguf");
    const names = Array.from({ length: 120_000 }, (_, i) => `piece-${i}`);
    const w = new GgufWriter().setStringArray("big.list", names);
    w.addTensor({ name: "x", dims: [32], type: GgmlType.F32, fill: (o) => o.fill(1) });
    await w.writeFile(path);
    const info = await readGgufInfo(path);
    assert.ok(info.dataOffset > 1 << 21);
    assert.deepEqual(metaArray(info, "big.list"), names);
    assert.equal(info.tensors[0]!.offset, 0);
  });

  it("writes a valid file without tensors", async () => {
    const path = join(dir, "empty.gguf");
    await new GgufWriter().setString("general.name", "x").writeFile(path);
    const info = await readGgufInfo(path);
    assert.equal(info.tensors.length, 0);
    assert.equal(metaString(info, "general.name"), "x");
  });

  it("rejects invalid input", async () => {
    assert.throws(() => new GgufWriter({ alignment: 24 }));
    const w = new GgufWriter();
    assert.throws(
      () => w.addTensor({ name: "q", dims: [48, 2], type: GgmlType.Q8_0, fill: () => {} }),
      /multiple of 32/,
    );
    assert.throws(() => w.addTensor({ name: "z", dims: [0], type: GgmlType.F32, fill: () => {} }));
    assert.throws(() => w.addTensor({ name: "q4", dims: [32], type: GgmlType.Q4_0, fill: () => {} }));
    w.addTensor({ name: "a", dims: [4], type: GgmlType.F32, fill: () => {} });
    assert.throws(
      () => w.addTensor({ name: "a", dims: [4], type: GgmlType.F32, fill: () => {} }),
      /duplicate/,
    );
    assert.throws(() => w.setUint32("k", -1));
    assert.throws(() => w.setInt32("k", 2 ** 31));
    assert.equal(tensorByteSize(GgmlType.Q8_0, [64, 10]), 20 * 34);
  });

  it("reader rejects a bad magic and a truncated header", async () => {
    assert.throws(() => parseGgufHeader(Buffer.from("GGML\x03\x00\x00\x00")), /magic/);
    const path = join(dir, "trunc.gguf");
    const w = new GgufWriter().setStringArray("list", ["a", "b", "c"]);
    w.addTensor({ name: "t", dims: [8], type: GgmlType.F32, fill: (o) => o.fill(0) });
    await w.writeFile(path);
    await truncate(path, 40);
    await assert.rejects(readGgufInfo(path), /truncated/);
    await writeFile(path, Buffer.alloc(0));
    await assert.rejects(readGgufInfo(path));
  });
});

describe("GgufWriter streaming", () => {
  it("writes pre-encoded tensors chunk by chunk in bounded memory, reporting progress", async () => {
    const path = join(dir, "big.gguf");
    const dims = [4096, 8192];
    const tensorBytes = tensorByteSize(GgmlType.F16, dims); // 64 MiB
    const chunks: number[] = [];
    const baseline = process.memoryUsage().arrayBuffers;
    let peak = baseline;
    const w = new GgufWriter().addTensor({
      name: "big",
      dims,
      type: GgmlType.F16,
      fillEncoded: (out) => {
        chunks.push(out.length);
        out.fill(chunks.length);
        peak = Math.max(peak, process.memoryUsage().arrayBuffers);
      },
    });
    const progress: [number, number][] = [];
    const layout = await w.writeFile(path, {
      onProgress: (written, total) => progress.push([written, total]),
    });

    assert.equal(
      chunks.reduce((a, b) => a + b, 0),
      tensorBytes,
    );
    assert.ok(chunks.length >= 8 && Math.max(...chunks) <= 8 << 20, `chunks ${chunks}`);
    assert.ok(peak - baseline < tensorBytes / 2, `memory grew by ${peak - baseline} bytes`);
    assert.ok(progress.length >= chunks.length / 2);
    progress.forEach(([written, total], i) => {
      assert.equal(total, layout.fileSize);
      if (i > 0) assert.ok(written > progress[i - 1]![0]);
    });
    assert.equal(progress.at(-1)?.[0], layout.fileSize);
    assert.equal((await stat(path)).size, layout.fileSize);
    // chunks land in order
    const data = (await readFile(path)).subarray(layout.dataOffset);
    let at = 0;
    chunks.forEach((n, i) => {
      assert.equal(data[at], i + 1);
      assert.equal(data[at + n - 1], i + 1);
      at += n;
    });
  });
});
