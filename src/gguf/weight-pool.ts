/**
 * Random weights at disk speed, for multi-gigabyte models: a pool of encoded random values is drawn
 * and encoded once, and every tensor is then streamed as a run of pool segments at offsets drawn from
 * the tensor's own seeded stream. Drawing and encoding each weight runs at tens of MB/s; copying
 * segments runs at several GB/s. Each value still comes from the pool's distribution.
 */
import type { Rng } from "../core/rng.js";
import type { GgmlType } from "./format/gguf-types.js";
import { tensorByteSize } from "./format/gguf-types.js";
import { encodeTensorChunk } from "./format/gguf-writer.js";

/** Elements per offset step: one Q8_0 block, so segments always start on a block. */
const UNIT = 32;
/**
 * Elements per segment: 96 units, which divides none of the usual row lengths (powers of two times
 * a small factor), so rows straddle segments and two rows are almost never copies of each other.
 */
const SEGMENT_ELEMENTS = 96 * UNIT;
const MAX_POOL_ELEMENTS = 1 << 22;

/** Pool size for a model whose largest tensor has `elements` elements: never more than it can use. */
export function poolElementsFor(elements: number): number {
  const wanted = Math.min(MAX_POOL_ELEMENTS, Math.ceil(elements / UNIT) * UNIT);
  return Math.max(2 * SEGMENT_ELEMENTS, wanted);
}

/** Fills a writer-supplied buffer with the next `out.length` encoded bytes of a tensor. */
export type ByteStream = (out: Buffer) => void;

export class WeightPool {
  private readonly bytes: Buffer;
  private readonly unitBytes: number;
  private readonly segmentBytes: number;
  /** Number of unit offsets a whole segment can start at. */
  private readonly starts: number;

  /** Encodes `values` (a multiple of 32 elements, at least two segments) as `type`. */
  constructor(type: GgmlType, values: Float32Array) {
    if (values.length % UNIT !== 0 || values.length < 2 * SEGMENT_ELEMENTS) {
      throw new Error(`weight pool: ${values.length} values (need a multiple of ${UNIT}, >= two segments)`);
    }
    this.bytes = Buffer.alloc(tensorByteSize(type, [values.length]));
    encodeTensorChunk(type, values, this.bytes);
    this.unitBytes = tensorByteSize(type, [UNIT]);
    this.segmentBytes = tensorByteSize(type, [SEGMENT_ELEMENTS]);
    this.starts = (values.length - SEGMENT_ELEMENTS) / UNIT + 1;
  }

  /**
   * A byte stream of segments at offsets drawn from `rng`. It depends only on the total bytes read,
   * not on how they are split into calls; calls must stay on whole elements (whole Q8_0 blocks).
   */
  stream(rng: Rng): ByteStream {
    let segment = 0;
    let left = 0;
    return (out) => {
      let pos = 0;
      while (pos < out.length) {
        if (left === 0) {
          segment = Math.floor(rng.next() * this.starts) * this.unitBytes;
          left = this.segmentBytes;
        }
        const n = Math.min(left, out.length - pos);
        const from = segment + this.segmentBytes - left;
        this.bytes.copy(out, pos, from, from + n);
        pos += n;
        left -= n;
      }
    };
  }
}
