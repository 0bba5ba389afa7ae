import type { Request } from "../core/request.js";
import type { KvChanges } from "../core/step-plan.js";
import type { KvSlot } from "./kv-slot.js";

/**
 * Who holds each slot, as the scheduler's KV ownership changes say: a running request, or a program's pin
 * (a finished request's sequence); a slot neither holds is cache. Also the slots' recency (`lastUse`).
 */
export class SlotOwners {
  /** slots of running requests, by request id */
  private readonly byRequest = new Map<string, KvSlot>();
  /** pinned slots, by program id (a program has one pin at most) */
  private readonly byPin = new Map<string, KvSlot>();
  private useCounter = 0;

  slotOf(request: Request): KvSlot | undefined {
    const slot = this.byRequest.get(request.id);
    return slot?.owner === request ? slot : undefined;
  }

  /** The slot a request was admitted to, running or not. */
  slotOfId(requestId: string): KvSlot | undefined {
    return this.byRequest.get(requestId);
  }

  /** Marks a slot as just used (admission prefers the most recent, the fallback evicts the least). */
  touch(slot: KvSlot): void {
    slot.lastUse = ++this.useCounter;
  }

  /** The admitted request runs in `slot`. */
  own(slot: KvSlot, request: Request): void {
    slot.owner = request;
    slot.requestId = request.id;
    slot.programId = request.programId;
    this.touch(slot);
    this.byRequest.set(request.id, slot);
  }

  /**
   * A request's sequence that its program pinned stays resident for the pin; a released request's or pin's
   * sequence becomes cache. Changes about sequences the engine already dropped are ignored.
   */
  apply(changes: KvChanges): void {
    for (const pin of changes.pinned) {
      const slot = this.byRequest.get(pin.requestId);
      if (!slot) continue;
      this.disown(slot);
      const previous = this.byPin.get(pin.programId);
      if (previous) this.unpin(previous);
      slot.pinnedFor = pin.programId;
      this.byPin.set(pin.programId, slot);
    }
    for (const release of changes.released) {
      if (release.holder === "request") {
        const slot = this.byRequest.get(release.requestId);
        if (slot) this.disown(slot);
      } else {
        const slot = this.byPin.get(release.programId);
        if (slot && slot.requestId === release.requestId) this.unpin(slot);
      }
    }
  }

  /** A running request's slot becomes resident (cache unless a pin then claims it). */
  disown(slot: KvSlot): void {
    const request = slot.owner;
    if (!request) return;
    if (this.byRequest.get(request.id) === slot) this.byRequest.delete(request.id);
    slot.owner = null;
    this.touch(slot);
    if (slot.length === 0) slot.content = null;
  }

  unpin(slot: KvSlot): void {
    if (slot.pinnedFor === null) return;
    if (this.byPin.get(slot.pinnedFor) === slot) this.byPin.delete(slot.pinnedFor);
    slot.pinnedFor = null;
  }

  /** Nobody holds the slot any more (it is being emptied). */
  release(slot: KvSlot): void {
    if (slot.owner && this.byRequest.get(slot.owner.id) === slot) this.byRequest.delete(slot.owner.id);
    slot.owner = null;
    this.unpin(slot);
  }
}
