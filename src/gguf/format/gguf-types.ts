/**
 * Constants of the GGUF container format (version 3) and the few ggml tensor types we write.
 * Spec: the GGUF file is `magic, version, tensor_count, kv_count, kv*, tensor_info*, padding, data`,
 * little-endian throughout, strings as `u64 length + UTF-8 bytes` (no terminator).
 */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Metadata value types (gguf_type). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufValueType = (typeof GgufValueType)[keyof typeof GgufValueType];

/** Tensor element types (ggml_type); only the ones this project writes or needs to size. */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  BF16: 30,
} as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

/** Elements per block and bytes per block of each supported tensor type. */
const TYPE_LAYOUT: Record<number, { name: string; blockSize: number; typeSize: number }> = {
  [GgmlType.F32]: { name: "F32", blockSize: 1, typeSize: 4 },
  [GgmlType.F16]: { name: "F16", blockSize: 1, typeSize: 2 },
  [GgmlType.Q4_0]: { name: "Q4_0", blockSize: 32, typeSize: 18 },
  [GgmlType.Q4_1]: { name: "Q4_1", blockSize: 32, typeSize: 20 },
  [GgmlType.Q5_0]: { name: "Q5_0", blockSize: 32, typeSize: 22 },
  [GgmlType.Q5_1]: { name: "Q5_1", blockSize: 32, typeSize: 24 },
  [GgmlType.Q8_0]: { name: "Q8_0", blockSize: 32, typeSize: 34 },
  [GgmlType.BF16]: { name: "BF16", blockSize: 1, typeSize: 2 },
};

export function ggmlTypeName(type: number): string {
  return TYPE_LAYOUT[type]?.name ?? `type${type}`;
}

/** Whether this project knows the byte layout of a ggml type. */
export function isKnownGgmlType(type: number): boolean {
  return TYPE_LAYOUT[type] !== undefined;
}

/** Bytes of a tensor of `type` with shape `dims` (dims[0] is the contiguous, innermost dimension). */
export function tensorByteSize(type: number, dims: readonly number[]): number {
  const layout = TYPE_LAYOUT[type];
  if (!layout) throw new Error(`unsupported ggml type ${type}`);
  const row = dims[0] ?? 1;
  if (row % layout.blockSize !== 0) {
    throw new Error(`${layout.name} rows must be a multiple of ${layout.blockSize} elements, got ${row}`);
  }
  const elements = dims.reduce((a, b) => a * b, 1);
  return (elements / layout.blockSize) * layout.typeSize;
}

/** `general.file_type` values (llama_ftype) for whole-model types. */
export const LlamaFileType = {
  ALL_F32: 0,
  MOSTLY_F16: 1,
  MOSTLY_Q8_0: 7,
  MOSTLY_BF16: 32,
} as const;
export type LlamaFileType = (typeof LlamaFileType)[keyof typeof LlamaFileType];

export function alignUp(n: number, alignment: number): number {
  return Math.ceil(n / alignment) * alignment;
}
