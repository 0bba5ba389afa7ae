/**
 * The runner's KV cells as the engine accounts for them: which cells each slot holds, with a reference
 * count per cell (copySeq shares cells; a cell is free when no slot holds it). It mirrors llama.cpp's own
 * bookkeeping, so the engine knows before a decode whether the pool has room. With the streams layout no
 * cell is shared and each slot's cells lie in its own stream; counting them over all streams is exact
 * because no slot outgrows its stream (the engine caps a sequence at the runner's maxContextTokens).
 */
export class CellLedger {
  private readonly refs: Uint16Array;
  private readonly free: Int32Array;
  private numFreeCells: number;

  constructor(readonly numCells: number) {
    this.refs = new Uint16Array(numCells);
    this.free = new Int32Array(numCells);
    for (let i = 0; i < numCells; i++) this.free[i] = numCells - 1 - i;
    this.numFreeCells = numCells;
  }

  get numFree(): number {
    return this.numFreeCells;
  }

  get numUsed(): number {
    return this.numCells - this.numFreeCells;
  }

  /** Appends n fresh cells to a slot's cell list. */
  alloc(cells: number[], n: number): void {
    if (n > this.numFreeCells) throw new Error(`cell ledger: ${n} cells wanted, ${this.numFreeCells} free`);
    for (let i = 0; i < n; i++) {
      const cell = this.free[--this.numFreeCells] as number;
      this.refs[cell] = 1;
      cells.push(cell);
    }
  }

  /** Releases the slot's cells at positions [from, to) and removes them from its list. */
  release(cells: number[], from: number, to = cells.length): void {
    for (let i = from; i < to; i++) this.unref(cells[i] as number);
    cells.splice(from, to - from);
  }

  /** dst (holding positions >= n, or nothing) takes src's cells for positions [0, n). */
  sharePrefix(src: readonly number[], dst: number[], n: number): void {
    const rest = dst.splice(0);
    for (let i = 0; i < n; i++) {
      const cell = src[i] as number;
      this.refs[cell] = (this.refs[cell] as number) + 1;
      dst.push(cell);
    }
    for (const cell of rest) dst.push(cell);
  }

  /** Cells only this slot holds (what dropping it would free). */
  exclusive(cells: readonly number[]): number {
    let n = 0;
    for (const cell of cells) if (this.refs[cell] === 1) n++;
    return n;
  }

  private unref(cell: number): void {
    const r = (this.refs[cell] as number) - 1;
    if (r < 0) throw new Error(`cell ledger: cell ${cell} released twice`);
    this.refs[cell] = r;
    if (r === 0) this.free[this.numFreeCells++] = cell;
  }
}
