import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { balancerViews, parseShowStat } from "./haproxy-stats.js";

// `show stat` of HAProxy 2.6 (fields cut to those read, as HAProxy names them), r1 cut off mid-request:
// its health check timed out, one answer it had begun was lost and two requests went to r2
const CSV = `# pxname,svname,status,wredis,srv_abrt,check_status,check_desc,last_chk,lastchg
continuum,FRONTEND,OPEN,,,,,,
by_program,r1,DOWN,1,1,L7TOUT,Layer7 timeout,,12
by_program,r2,UP,0,0,L7OK,Layer7 check passed,,40
by_program,BACKEND,UP,1,1,,,,40
least_loaded,r1,DOWN,1,0,,,,12
least_loaded,r2,UP,0,0,,,,40
by_response,r1,DOWN,0,0,,,,12
by_response,r2,UP,0,0,,,,40
supervisor,supervisor,UP,0,0,L4OK,Layer4 check passed,,40
`;

describe("HAProxy's view of the replicas (show stat)", () => {
  test("status and check from the checked backend, lost and retried summed over the replica's backends", () => {
    const views = balancerViews(parseShowStat(CSV), ["r1", "r2", "r3"], "by_program", [
      "by_program",
      "least_loaded",
      "by_response",
    ]);
    assert.deepEqual(views.get("r1"), {
      status: "DOWN",
      check: "Layer7 timeout",
      changedAgoS: 12,
      retried: 2,
      lost: 1,
    });
    assert.deepEqual(views.get("r2"), {
      status: "UP",
      check: "Layer7 check passed",
      changedAgoS: 40,
      retried: 0,
      lost: 0,
    });
    assert.equal(views.has("r3"), false, "a replica HAProxy does not list");
  });

  test("the check's detail joins its description; nothing parses from what is not `show stat`", () => {
    const rows = parseShowStat(
      "# pxname,svname,status,check_desc,last_chk,lastchg\nby_program,r1,DOWN,Layer4 connection problem,Connection refused,\n",
    );
    const view = balancerViews(rows, ["r1"], "by_program", ["by_program"]).get("r1");
    assert.equal(view?.check, "Layer4 connection problem: Connection refused");
    assert.equal(view?.changedAgoS, null);
    assert.deepEqual(parseShowStat("Unknown command\n"), []);
  });
});
