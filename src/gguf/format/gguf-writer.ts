/**
 * A streaming GGUF v3 writer. Metadata and tensor infos are encoded up front (their size fixes every
 * tensor's offset); tensor data is then produced chunk by chunk by each tensor's `fill` (floats) or
 * `fillEncoded` (bytes) callback and written straight to the file through two staging buffers, so a
 * model of many gigabytes never sits in memory.
 */
import {
  alignUp,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GGUF_VERSION,
  GgmlType,
  GgufValueType,
  ggmlTypeName,
  tensorByteSize,
} from "./gguf-types.js";
import { StagedFileWriter } from "./staged-file-writer.js";

export type GgufScalar = number | bigint | boolean | string;

/** One metadata value: a scalar of `type`, or (type ARRAY) a list of scalars of `itemType`. */
export type GgufMetadataValue =
  | { type: Exclude<GgufValueType, typeof GgufValueType.ARRAY>; value: GgufScalar }
  | { type: typeof GgufValueType.ARRAY; itemType: GgufValueType; value: GgufScalar[] };

interface TensorShape {
  name: string;
  /** GGUF dimension order: dims[0] is the contiguous (innermost) dimension, i.e. the row length. */
  dims: readonly number[];
  /** F32, F16, BF16 or Q8_0. */
  type: GgmlType;
}

/** A tensor given as float values, which the writer encodes. */
export interface FloatTensorSource extends TensorShape {
  /**
   * Writes elements [start, start + out.length) of the tensor (flat, row-major in GGUF order) into
   * `out`. Called once per chunk, in increasing order of `start`, covering the tensor exactly once;
   * chunk lengths are multiples of 32 except possibly the last, so a stateful generator (a seeded
   * RNG stream) may ignore `start`.
   */
  fill(out: Float32Array, start: number): void;
}

/** A tensor given as already encoded bytes (the fast path for large models). */
export interface EncodedTensorSource extends TensorShape {
  /**
   * Writes the encoded data of elements [start, start + count) into `out`, every byte of it. Called
   * in increasing order of `start`, covering the tensor exactly once; counts are multiples of 32
   * except possibly the last.
   */
  fillEncoded(out: Buffer, start: number, count: number): void;
}

/** A tensor to write. Its data is pulled through `fill` or `fillEncoded` when the file is written. */
export type TensorSource = FloatTensorSource | EncodedTensorSource;

export interface WriteOptions {
  /** Progress: bytes on disk so far and the file size, after each write. */
  onProgress?: (written: number, total: number) => void;
}

export interface TensorLayout {
  name: string;
  dims: number[];
  type: GgmlType;
  /** Offset from the start of the data section (a multiple of the alignment). */
  offset: number;
  /** Bytes of data (without padding). */
  size: number;
}

export interface GgufLayout {
  alignment: number;
  /** Absolute file offset of the data section. */
  dataOffset: number;
  tensors: TensorLayout[];
  /** Total file size in bytes. */
  fileSize: number;
}

const WRITABLE_TYPES = new Set<number>([GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0]);
/** Elements generated per fill call (a multiple of the Q8_0 block size). */
const CHUNK_ELEMENTS = 1 << 16;
/** Elements per fillEncoded call: up to 8 MiB (F32), one staging buffer of the file writer. */
const ENCODED_CHUNK_ELEMENTS = 1 << 21;
const textEncoder = new TextEncoder();

/** Little-endian byte builder for the header. */
class ByteBuilder {
  private buf = Buffer.alloc(1 << 16);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = Buffer.alloc(size);
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }

  u8(v: number): void {
    this.reserve(1);
    this.buf.writeUInt8(v, this.length);
    this.length += 1;
  }
  i8(v: number): void {
    this.reserve(1);
    this.buf.writeInt8(v, this.length);
    this.length += 1;
  }
  u16(v: number): void {
    this.reserve(2);
    this.buf.writeUInt16LE(v, this.length);
    this.length += 2;
  }
  i16(v: number): void {
    this.reserve(2);
    this.buf.writeInt16LE(v, this.length);
    this.length += 2;
  }
  u32(v: number): void {
    this.reserve(4);
    this.buf.writeUInt32LE(v, this.length);
    this.length += 4;
  }
  i32(v: number): void {
    this.reserve(4);
    this.buf.writeInt32LE(v, this.length);
    this.length += 4;
  }
  f32(v: number): void {
    this.reserve(4);
    this.buf.writeFloatLE(v, this.length);
    this.length += 4;
  }
  f64(v: number): void {
    this.reserve(8);
    this.buf.writeDoubleLE(v, this.length);
    this.length += 8;
  }
  u64(v: number | bigint): void {
    this.reserve(8);
    this.buf.writeBigUInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  i64(v: number | bigint): void {
    this.reserve(8);
    this.buf.writeBigInt64LE(BigInt(v), this.length);
    this.length += 8;
  }
  str(s: string): void {
    const bytes = textEncoder.encode(s);
    this.u64(bytes.length);
    this.reserve(bytes.length);
    this.buf.set(bytes, this.length);
    this.length += bytes.length;
  }
  zeros(n: number): void {
    this.reserve(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
  bytes(): Buffer {
    return this.buf.subarray(0, this.length);
  }
}

function expectNumber(v: GgufScalar, what: string): number {
  if (typeof v !== "number") throw new Error(`${what}: expected a number, got ${typeof v}`);
  return v;
}

function writeScalar(b: ByteBuilder, type: GgufValueType, v: GgufScalar, key: string): void {
  switch (type) {
    case GgufValueType.UINT8:
      b.u8(expectNumber(v, key));
      return;
    case GgufValueType.INT8:
      b.i8(expectNumber(v, key));
      return;
    case GgufValueType.UINT16:
      b.u16(expectNumber(v, key));
      return;
    case GgufValueType.INT16:
      b.i16(expectNumber(v, key));
      return;
    case GgufValueType.UINT32:
      b.u32(expectNumber(v, key));
      return;
    case GgufValueType.INT32:
      b.i32(expectNumber(v, key));
      return;
    case GgufValueType.FLOAT32:
      b.f32(expectNumber(v, key));
      return;
    case GgufValueType.FLOAT64:
      b.f64(expectNumber(v, key));
      return;
    case GgufValueType.UINT64:
      if (typeof v !== "number" && typeof v !== "bigint") throw new Error(`${key}: expected an integer`);
      b.u64(v);
      return;
    case GgufValueType.INT64:
      if (typeof v !== "number" && typeof v !== "bigint") throw new Error(`${key}: expected an integer`);
      b.i64(v);
      return;
    case GgufValueType.BOOL:
      if (typeof v !== "boolean") throw new Error(`${key}: expected a boolean`);
      b.u8(v ? 1 : 0);
      return;
    case GgufValueType.STRING:
      if (typeof v !== "string") throw new Error(`${key}: expected a string`);
      b.str(v);
      return;
    default:
      throw new Error(`${key}: cannot write a scalar of gguf type ${type}`);
  }
}

// ---- float conversion / quantization -------------------------------------------------------------

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** IEEE binary16 bits from IEEE binary32 bits, rounding to nearest even (like ggml's FP32->FP16). */
function halfFromFloatBits(x: number): number {
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // a carry out of the mantissa correctly bumps the exponent (and saturates to infinity)
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}

/** bfloat16 bits (the top half of binary32) from binary32 bits, rounding to nearest even; NaN stays NaN. */
function bfloat16FromFloatBits(x: number): number {
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff;
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

/** bfloat16 bits of a float, rounding to nearest even (like ggml's FP32->BF16). */
export function float32ToBfloat16Bits(value: number): number {
  f32Scratch[0] = value;
  return bfloat16FromFloatBits(u32Scratch[0]!);
}

/** IEEE binary16 bits of a float, rounding to nearest even (like ggml's FP32->FP16). */
export function float32ToFloat16Bits(value: number): number {
  f32Scratch[0] = value;
  return halfFromFloatBits(u32Scratch[0]!);
}

/** Float value of IEEE binary16 bits. */
export function float16BitsToFloat32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Encodes `src` as `type` into `out` (which must be exactly the encoded size). */
export function encodeTensorChunk(type: GgmlType, src: Float32Array, out: Buffer): void {
  if (type === GgmlType.F32) {
    Buffer.from(src.buffer, src.byteOffset, src.byteLength).copy(out);
    return;
  }
  if (type === GgmlType.F16 || type === GgmlType.BF16) {
    const convert = type === GgmlType.F16 ? halfFromFloatBits : bfloat16FromFloatBits;
    const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
    if (LITTLE_ENDIAN && out.byteOffset % 2 === 0) {
      const dst = new Uint16Array(out.buffer, out.byteOffset, src.length);
      for (let i = 0; i < bits.length; i++) dst[i] = convert(bits[i]!);
    } else {
      for (let i = 0; i < bits.length; i++) out.writeUInt16LE(convert(bits[i]!), i * 2);
    }
    return;
  }
  if (type === GgmlType.Q8_0) {
    // block: f16 scale d, then 32 int8 q with x ~= d * q (ggml's quantize_row_q8_0 reference)
    const blocks = src.length / 32;
    const qs = new Int8Array(out.buffer, out.byteOffset, out.length);
    for (let b = 0; b < blocks; b++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(src[b * 32 + j]!));
      const d = amax / 127;
      const id = d !== 0 ? 1 / d : 0;
      const base = b * 34;
      out.writeUInt16LE(float32ToFloat16Bits(d), base);
      for (let j = 0; j < 32; j++) {
        const v = src[b * 32 + j]! * id;
        // roundf: half away from zero
        qs[base + 2 + j] = v < 0 ? -Math.round(-v) : Math.round(v);
      }
    }
    return;
  }
  throw new Error(`cannot encode tensors of type ${ggmlTypeName(type)}`);
}

// ---- the writer -------------------------------------------------------------------------------------

export class GgufWriter {
  private readonly metadata = new Map<string, GgufMetadataValue>();
  private readonly tensors: TensorSource[] = [];
  readonly alignment: number;

  constructor(opts: { alignment?: number } = {}) {
    this.alignment = opts.alignment ?? GGUF_DEFAULT_ALIGNMENT;
    if (this.alignment <= 0 || (this.alignment & (this.alignment - 1)) !== 0) {
      throw new Error(`alignment must be a power of two, got ${this.alignment}`);
    }
    this.setUint32("general.alignment", this.alignment);
  }

  set(key: string, value: GgufMetadataValue): this {
    this.metadata.set(key, value);
    return this;
  }
  setUint32(key: string, value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff) throw new Error(`${key}: not a uint32`);
    return this.set(key, { type: GgufValueType.UINT32, value });
  }
  setInt32(key: string, value: number): this {
    if (!Number.isInteger(value) || value < -0x80000000 || value > 0x7fffffff) {
      throw new Error(`${key}: not an int32`);
    }
    return this.set(key, { type: GgufValueType.INT32, value });
  }
  setUint64(key: string, value: number | bigint): this {
    return this.set(key, { type: GgufValueType.UINT64, value });
  }
  setFloat32(key: string, value: number): this {
    return this.set(key, { type: GgufValueType.FLOAT32, value });
  }
  setBool(key: string, value: boolean): this {
    return this.set(key, { type: GgufValueType.BOOL, value });
  }
  setString(key: string, value: string): this {
    return this.set(key, { type: GgufValueType.STRING, value });
  }
  setStringArray(key: string, value: readonly string[]): this {
    return this.set(key, { type: GgufValueType.ARRAY, itemType: GgufValueType.STRING, value: [...value] });
  }
  setFloat32Array(key: string, value: ArrayLike<number>): this {
    return this.set(key, {
      type: GgufValueType.ARRAY,
      itemType: GgufValueType.FLOAT32,
      value: Array.from(value),
    });
  }
  setInt32Array(key: string, value: ArrayLike<number>): this {
    return this.set(key, {
      type: GgufValueType.ARRAY,
      itemType: GgufValueType.INT32,
      value: Array.from(value),
    });
  }

  addTensor(tensor: TensorSource): this {
    if (!WRITABLE_TYPES.has(tensor.type))
      throw new Error(`${tensor.name}: cannot write ${ggmlTypeName(tensor.type)}`);
    if (tensor.dims.length < 1 || tensor.dims.length > 4) throw new Error(`${tensor.name}: 1 to 4 dims`);
    if (tensor.dims.some((d) => !Number.isInteger(d) || d < 1)) throw new Error(`${tensor.name}: bad dims`);
    if (this.tensors.some((t) => t.name === tensor.name)) throw new Error(`duplicate tensor ${tensor.name}`);
    tensorByteSize(tensor.type, tensor.dims); // validates the row length against the block size
    this.tensors.push(tensor);
    return this;
  }

  /** Encodes everything before the data section (without the padding that follows it). */
  private encodeHeader(layout: TensorLayout[]): Buffer {
    const b = new ByteBuilder();
    b.u32(GGUF_MAGIC);
    b.u32(GGUF_VERSION);
    b.u64(this.tensors.length);
    b.u64(this.metadata.size);
    for (const [key, v] of this.metadata) {
      b.str(key);
      b.u32(v.type);
      if (v.type === GgufValueType.ARRAY) {
        b.u32(v.itemType);
        b.u64(v.value.length);
        for (const item of v.value) writeScalar(b, v.itemType, item, key);
      } else {
        writeScalar(b, v.type, v.value, key);
      }
    }
    for (const t of layout) {
      b.str(t.name);
      b.u32(t.dims.length);
      for (const d of t.dims) b.u64(d);
      b.u32(t.type);
      b.u64(t.offset);
    }
    return b.bytes();
  }

  private tensorLayout(): TensorLayout[] {
    let offset = 0;
    return this.tensors.map((t) => {
      const size = tensorByteSize(t.type, t.dims);
      const entry = { name: t.name, dims: [...t.dims], type: t.type, offset, size };
      offset = alignUp(offset + size, this.alignment);
      return entry;
    });
  }

  /** Where everything will land in the file, without writing it. */
  layout(): GgufLayout {
    return this.plan().layout;
  }

  /** The layout and the header bytes (metadata and tensor infos, padded to the data section). */
  private plan(): { layout: GgufLayout; header: Buffer } {
    const tensors = this.tensorLayout();
    const encoded = this.encodeHeader(tensors);
    const dataOffset = alignUp(encoded.length, this.alignment);
    const header = Buffer.alloc(dataOffset);
    encoded.copy(header);
    const last = tensors[tensors.length - 1];
    const dataSize = last ? alignUp(last.offset + last.size, this.alignment) : 0;
    return {
      layout: { alignment: this.alignment, dataOffset, tensors, fileSize: dataOffset + dataSize },
      header,
    };
  }

  /** Writes the whole file to `path` (created or truncated), streaming tensor data chunk by chunk. */
  async writeFile(path: string, opts: WriteOptions = {}): Promise<GgufLayout> {
    const { layout, header } = this.plan();
    const { onProgress } = opts;
    const file = await StagedFileWriter.open(path, {
      ...(onProgress ? { onWritten: (bytes: number) => onProgress(bytes, layout.fileSize) } : {}),
    });
    try {
      await file.append(header);
      const floats = new Float32Array(CHUNK_ELEMENTS);
      for (let i = 0; i < this.tensors.length; i++) {
        const src = this.tensors[i]!;
        const info = layout.tensors[i]!;
        if (file.position !== layout.dataOffset + info.offset)
          throw new Error(`internal: ${src.name} misplaced`);
        const total = src.dims.reduce((a, b) => a * b, 1);
        if ("fillEncoded" in src) {
          for (let start = 0; start < total; start += ENCODED_CHUNK_ELEMENTS) {
            const n = Math.min(ENCODED_CHUNK_ELEMENTS, total - start);
            src.fillEncoded(await file.region(tensorByteSize(src.type, [n])), start, n);
          }
        } else {
          for (let start = 0; start < total; start += CHUNK_ELEMENTS) {
            const n = Math.min(CHUNK_ELEMENTS, total - start);
            const chunk = floats.subarray(0, n);
            src.fill(chunk, start);
            encodeTensorChunk(src.type, chunk, await file.region(tensorByteSize(src.type, [n])));
          }
        }
        const padded = alignUp(info.offset + info.size, this.alignment) - (info.offset + info.size);
        if (padded > 0) (await file.region(padded)).fill(0);
      }
    } catch (err) {
      await file.abandon();
      throw err;
    }
    await file.close();
    return layout;
  }
}
