/**
 * llama-server's retention: its slots. A program's turns go to the slot that holds its KV (`id_slot`), and a
 * pinned program keeps its slot: a new program takes a slot nobody pinned (an empty one first, then the one
 * idle longest), and a pinned slot only when every other slot is busy; with every slot busy, a turn waits for
 * one (every turn is sent with its slot), except on a backend of one slot, where one turn is sent ahead for
 * llama-server to queue (see `queueAhead`). A pinned slot given away is saved first
 * (`POST /slots/{id}?action=save`, llama-server's `--slot-save-path`: the disk tier) and restored into the
 * slot its program next gets (`action=restore`); without `--slot-save-path` (llama-server answers 501), KV
 * that left its slot survives only in llama-server's own `--cache-ram` prompt cache.
 */
import { createHash } from "node:crypto";
import type { KvChanges } from "../../core/step-plan.js";
import type { ReplyTap } from "../reply-tap.js";
import type { GatewayTurn } from "../turn.js";
import { type MutableStats, NO_RETENTION_STATS, programKey, type Retention } from "./retention.js";

interface Slot {
  /** the program whose KV the slot holds (its latest turn's), null while empty */
  program: string | null;
  running: boolean;
  pinned: boolean;
  idleSinceMs: number;
}

/** How long a slot save or restore may take (a large context on a slow disk takes seconds). */
const SLOT_ACTION_TIMEOUT_MS = 60_000;

export class SlotRetention implements Retention {
  readonly stats: MutableStats = { ...NO_RETENTION_STATS };
  /** one on a backend of one slot (`queueAhead`), else none */
  readonly turnsAhead: number;
  private readonly slots: Slot[];
  private readonly slotOfProgram = new Map<string, number>();
  private readonly slotOfRequest = new Map<string, number>();
  /** programs whose KV was saved to disk when their pinned slot was given away: the file's name */
  private readonly saved = new Map<string, string>();
  /** false once llama-server said it has no `--slot-save-path` */
  private canSave = true;
  /** turns waiting for a slot to stop running, first come first served */
  private readonly slotFreed: (() => void)[] = [];
  /** the turn sent ahead to a backend of one slot, which llama-server starts as the running one ends */
  private queued: { requestId: string; program: string } | null = null;

  constructor(
    private readonly url: string,
    numSlots: number,
    private readonly log: (line: string) => void,
  ) {
    this.turnsAhead = numSlots === 1 ? 1 : 0;
    this.slots = Array.from({ length: numSlots }, () => ({
      program: null,
      running: false,
      pinned: false,
      idleSinceMs: 0,
    }));
  }

  async prepare(turn: GatewayTurn, requestId: string): Promise<Record<string, unknown>> {
    const program = programKey(turn, requestId);
    if (this.slotFreed.length === 0 && this.queueAhead(program)) {
      return this.sendAhead(program, requestId);
    }
    const own = this.slotOfProgram.get(program);
    let index = own !== undefined && !this.slots[own]!.running ? own : this.pickSlot();
    // Every slot still runs: the scheduler let this turn start as another's reply reached its last token,
    // before that reply's stream ended. Wait for the slot: sent without one to a backend of several slots,
    // llama-server places the turn by itself, on a slot this table cannot know (its chat answers do not name
    // the slot), and a turn sent later with that slot's id would have its prompt loaded into a running slot.
    while (index === null) {
      await new Promise<void>((resolve) => this.slotFreed.push(resolve));
      // woken first in line: the slot is free, or a turn sent ahead has just taken it and this one is next
      if (this.queueAhead(program)) return this.sendAhead(program, requestId);
      index = own !== undefined && !this.slots[own]!.running ? own : this.pickSlot();
    }
    const displacedPinned = this.occupy(index, program, requestId);
    if (displacedPinned !== null) await this.save(index, displacedPinned);
    const file = index === own ? undefined : this.saved.get(program);
    if (file !== undefined) {
      this.saved.delete(program);
      await this.restore(index, file);
    }
    return { id_slot: index, cache_prompt: true };
  }

  /**
   * Whether to send this turn now, without a slot, while the one slot still runs. llama-server defers it and
   * starts it the moment the slot is released, having read, templated and tokenized it meanwhile; a turn
   * held here for the slot to free pays those ~10 ms with the slot idle (docs/gateway.md, "What the gateway
   * costs a turn"). Only where llama-server has one slot to put it on, one turn at a time, and not for a
   * program whose KV waits on disk (a restore needs the slot idle). The KV the running turn leaves goes to
   * llama-server's `--cache-ram`, never to the disk tier: the slot is not idle for a save in between.
   */
  private queueAhead(program: string): boolean {
    return this.turnsAhead > 0 && this.slots[0]!.running && this.queued === null && !this.saved.has(program);
  }

  private sendAhead(program: string, requestId: string): Record<string, unknown> {
    this.queued = { requestId, program };
    this.stats.turnsSentAhead++;
    return { cache_prompt: true };
  }

  /** Gives slot `index` to the program's turn; returns the program whose pin it displaced, if any. */
  private occupy(index: number, program: string, requestId: string): string | null {
    const slot = this.slots[index]!;
    const displaced = slot.program !== null && slot.program !== program ? slot.program : null;
    const displacedPinned = displaced !== null && slot.pinned;
    if (this.slotOfProgram.get(program) === index) this.stats.slotHits++;
    slot.program = program;
    slot.running = true;
    slot.pinned = false;
    this.slotOfProgram.set(program, index);
    this.slotOfRequest.set(requestId, index);
    if (displaced === null) return null;
    this.slotOfProgram.delete(displaced);
    if (!displacedPinned) return null;
    this.stats.pinsDisplaced++;
    return displaced;
  }

  /** An empty slot, else the unpinned one idle longest, else the pinned one idle longest; null while all run. */
  private pickSlot(): number | null {
    let best: number | null = null;
    const rank = (slot: Slot) => (slot.program === null ? 0 : slot.pinned ? 2 : 1);
    for (let i = 0; i < this.slots.length; i++) {
      const slot = this.slots[i]!;
      if (slot.running) continue;
      if (best === null) {
        best = i;
        continue;
      }
      const current = this.slots[best]!;
      if (
        rank(slot) < rank(current) ||
        (rank(slot) === rank(current) && slot.idleSinceMs < current.idleSinceMs)
      )
        best = i;
    }
    return best;
  }

  ended(_turn: GatewayTurn, requestId: string, _tap: ReplyTap, _ok: boolean): void {
    if (this.queued?.requestId === requestId) {
      // answered before the running turn's end reached us (an error, or a client gone): it holds no slot,
      // and the next turn in line may go ahead in its place
      this.queued = null;
      this.slotFreed.shift()?.();
      return;
    }
    const index = this.slotOfRequest.get(requestId);
    if (index === undefined) return;
    this.slotOfRequest.delete(requestId);
    const slot = this.slots[index]!;
    slot.running = false;
    slot.idleSinceMs = Date.now();
    const queued = this.queued;
    if (queued !== null) {
      // llama-server has started it on this slot: the displaced pin's KV went to its --cache-ram
      this.queued = null;
      this.occupy(index, queued.program, queued.requestId);
    }
    this.slotFreed.shift()?.();
  }

  applyKvChanges(changes: KvChanges): void {
    for (const pin of changes.pinned) {
      const index = this.slotOfProgram.get(pin.programId);
      if (index !== undefined) this.slots[index]!.pinned = true;
    }
    for (const release of changes.released) {
      if (release.holder !== "pin") continue;
      const index = this.slotOfProgram.get(release.programId);
      if (index !== undefined) this.slots[index]!.pinned = false;
      if (release.reason === "last_step") {
        this.saved.delete(release.programId);
      }
    }
  }

  tick(): void {}

  private fileOf(program: string): string {
    return `continuum-gateway-${createHash("sha256").update(program).digest("hex").slice(0, 32)}.bin`;
  }

  private async slotAction(index: number, action: "save" | "restore", filename: string): Promise<boolean> {
    try {
      const response = await fetch(`${this.url}/slots/${index}?action=${action}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ filename }),
        signal: AbortSignal.timeout(SLOT_ACTION_TIMEOUT_MS),
      });
      const text = await response.text();
      if (response.status === 501) {
        this.canSave = false;
        this.log(
          `gateway: ${this.url} has no --slot-save-path (${text.slice(0, 120)}): KV leaving a slot is kept by its --cache-ram only`,
        );
        return false;
      }
      return response.ok;
    } catch {
      return false;
    }
  }

  private async save(index: number, program: string): Promise<void> {
    if (!this.canSave) return;
    const file = this.fileOf(program);
    if (await this.slotAction(index, "save", file)) {
      this.stats.slotSaves++;
      this.saved.set(program, file);
    } else if (this.canSave) {
      this.stats.slotSaveFailures++;
    }
  }

  private async restore(index: number, file: string): Promise<void> {
    if (await this.slotAction(index, "restore", file)) this.stats.slotRestores++;
  }

  async close(): Promise<void> {}
}
