/**
 * A minimal GGUF reader: header, metadata and tensor infos (not tensor data). Reads only the head of
 * the file, growing the read window until the header fits.
 */
import { open } from "node:fs/promises";
import {
  alignUp,
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgufValueType,
  isKnownGgmlType,
  tensorByteSize,
} from "./gguf-types.js";
import type { GgufMetadataValue, GgufScalar } from "./gguf-writer.js";

export interface GgufTensorInfo {
  name: string;
  /** GGUF order: dims[0] is the contiguous dimension. */
  dims: number[];
  type: number;
  /** Offset relative to the data section. */
  offset: number;
  /** Data bytes (without padding), or -1 for a type this reader does not know. */
  size: number;
}

export interface GgufInfo {
  version: number;
  alignment: number;
  metadata: Map<string, GgufMetadataValue>;
  tensors: GgufTensorInfo[];
  /** Absolute file offset of the data section. */
  dataOffset: number;
  /** Size of the file in bytes. */
  fileSize: number;
}

class NeedMore extends Error {}

const textDecoder = new TextDecoder("utf-8", { fatal: true });

class Cursor {
  pos = 0;
  constructor(
    private readonly buf: Buffer,
    private readonly complete: boolean,
  ) {}

  private need(n: number): void {
    if (this.pos + n > this.buf.length) {
      if (this.complete) throw new Error("GGUF file is truncated");
      throw new NeedMore();
    }
  }
  u8(): number {
    this.need(1);
    return this.buf.readUInt8(this.pos++);
  }
  i8(): number {
    this.need(1);
    return this.buf.readInt8(this.pos++);
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16LE(this.pos);
    this.pos += 2;
    return v;
  }
  i16(): number {
    this.need(2);
    const v = this.buf.readInt16LE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  i32(): number {
    this.need(4);
    const v = this.buf.readInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  f32(): number {
    this.need(4);
    const v = this.buf.readFloatLE(this.pos);
    this.pos += 4;
    return v;
  }
  f64(): number {
    this.need(8);
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }
  u64(): bigint {
    this.need(8);
    const v = this.buf.readBigUInt64LE(this.pos);
    this.pos += 8;
    return v;
  }
  i64(): bigint {
    this.need(8);
    const v = this.buf.readBigInt64LE(this.pos);
    this.pos += 8;
    return v;
  }
  /** A u64 that must fit a JS number (counts, lengths, offsets). */
  size(): number {
    const v = this.u64();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error("GGUF size field too large");
    return Number(v);
  }
  str(): string {
    const n = this.size();
    this.need(n);
    const s = textDecoder.decode(this.buf.subarray(this.pos, this.pos + n));
    this.pos += n;
    return s;
  }
}

function readScalar(c: Cursor, type: number): GgufScalar {
  switch (type) {
    case GgufValueType.UINT8:
      return c.u8();
    case GgufValueType.INT8:
      return c.i8();
    case GgufValueType.UINT16:
      return c.u16();
    case GgufValueType.INT16:
      return c.i16();
    case GgufValueType.UINT32:
      return c.u32();
    case GgufValueType.INT32:
      return c.i32();
    case GgufValueType.FLOAT32:
      return c.f32();
    case GgufValueType.FLOAT64:
      return c.f64();
    case GgufValueType.UINT64:
      return c.u64();
    case GgufValueType.INT64:
      return c.i64();
    case GgufValueType.BOOL:
      return c.u8() !== 0;
    case GgufValueType.STRING:
      return c.str();
    default:
      throw new Error(`unknown GGUF value type ${type}`);
  }
}

/** Parses a GGUF header from the bytes `buf` (the head of a file of `fileSize` bytes). */
export function parseGgufHeader(buf: Buffer, fileSize = buf.length): GgufInfo {
  const c = new Cursor(buf, buf.length >= fileSize);
  if (c.u32() !== GGUF_MAGIC) throw new Error("not a GGUF file (bad magic)");
  const version = c.u32();
  if (version !== 2 && version !== 3) throw new Error(`unsupported GGUF version ${version}`);
  const nTensors = c.size();
  const nKv = c.size();
  const metadata = new Map<string, GgufMetadataValue>();
  for (let i = 0; i < nKv; i++) {
    const key = c.str();
    const type = c.u32();
    if (type === GgufValueType.ARRAY) {
      const itemType = c.u32();
      if (itemType === GgufValueType.ARRAY) throw new Error(`${key}: nested arrays are not supported`);
      const n = c.size();
      const value: GgufScalar[] = new Array(n);
      for (let j = 0; j < n; j++) value[j] = readScalar(c, itemType);
      metadata.set(key, { type, itemType: itemType as GgufValueType, value });
    } else {
      const value = readScalar(c, type);
      metadata.set(key, { type: type as Exclude<GgufValueType, 9>, value });
    }
  }
  const alignmentKv = metadata.get("general.alignment");
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  if (alignmentKv) {
    if (alignmentKv.type !== GgufValueType.UINT32) throw new Error("general.alignment must be a uint32");
    alignment = alignmentKv.value as number;
  }
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = c.str();
    const nDims = c.u32();
    if (nDims < 1 || nDims > 4) throw new Error(`${name}: ${nDims} dims`);
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(c.size());
    const type = c.u32();
    const offset = c.size();
    const size = isKnownGgmlType(type) ? tensorByteSize(type, dims) : -1;
    tensors.push({ name, dims, type, offset, size });
  }
  const dataOffset = nTensors > 0 ? alignUp(c.pos, alignment) : c.pos;
  return { version, alignment, metadata, tensors, dataOffset, fileSize };
}

/** Reads the header, metadata and tensor infos of the GGUF file at `path`. */
export async function readGgufInfo(path: string): Promise<GgufInfo> {
  const fh = await open(path, "r");
  try {
    const { size: fileSize } = await fh.stat();
    let window = Math.min(fileSize, 1 << 20);
    for (;;) {
      const buf = Buffer.alloc(window);
      const { bytesRead } = await fh.read(buf, 0, window, 0);
      try {
        return parseGgufHeader(buf.subarray(0, bytesRead), fileSize);
      } catch (err) {
        if (!(err instanceof NeedMore) || window >= fileSize) throw err;
        window = Math.min(fileSize, window * 4);
      }
    }
  } finally {
    await fh.close();
  }
}

/** Metadata helpers that throw a clear error when a key is missing or of another type. */
export function metaNumber(info: GgufInfo, key: string): number {
  const v = info.metadata.get(key);
  if (!v || v.type === GgufValueType.ARRAY || typeof v.value !== "number") {
    throw new Error(`GGUF metadata ${key} is missing or not a number`);
  }
  return v.value;
}

export function metaString(info: GgufInfo, key: string): string {
  const v = info.metadata.get(key);
  if (!v || v.type !== GgufValueType.STRING)
    throw new Error(`GGUF metadata ${key} is missing or not a string`);
  return v.value as string;
}

export function metaArray(info: GgufInfo, key: string): GgufScalar[] {
  const v = info.metadata.get(key);
  if (!v || v.type !== GgufValueType.ARRAY)
    throw new Error(`GGUF metadata ${key} is missing or not an array`);
  return v.value;
}
