/**
 * A Continuum replica pins KV itself: the gateway forwards each turn with its program's identity (`job_id`,
 * `is_last_step`, `this_func_call`), whatever header or body field the client named it by, and the
 * replica's own policy pins, expires and sacrifices (docs/gateway.md). The gateway's pins stay its model's.
 */
import type { KvChanges } from "../../core/step-plan.js";
import type { GatewayTurn } from "../turn.js";
import { NO_RETENTION_STATS, type Retention, type RetentionStats } from "./retention.js";

/** Where else a client may have named its program: left out, so that the replica reads one id. */
export const PROGRAM_FIELDS = ["job_id", "program_id", "session_id", "session_params"] as const;

export class NativeRetention implements Retention {
  readonly stats: RetentionStats = NO_RETENTION_STATS;
  readonly turnsAhead = 0;

  async prepare(turn: GatewayTurn): Promise<Record<string, unknown>> {
    const fields: Record<string, unknown> = {};
    for (const name of PROGRAM_FIELDS) fields[name] = undefined;
    if (turn.programId === null) return fields;
    return {
      ...fields,
      job_id: turn.programId,
      is_last_step: turn.isLastStep,
      ...(turn.toolHint === null ? {} : { this_func_call: turn.toolHint }),
    };
  }

  ended(): void {}

  applyKvChanges(_changes: KvChanges): void {}

  tick(): void {}

  async close(): Promise<void> {}
}
