import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { headCommand } from "./shell-head-command.js";

describe("headCommand", () => {
  it("skips cd segments and reports the command that does the work", () => {
    assert.equal(headCommand("cd /testbed && python -m pytest tests/test_utils.py -x"), "python");
    assert.equal(headCommand("cd /app; cd src || exit 1"), "exit");
  });

  it("reports cd when the script only changes directory", () => {
    assert.equal(headCommand("cd /testbed"), "cd");
    assert.equal(headCommand("cd /a && cd b"), "cd");
  });

  it("uses the basename of a path command", () => {
    assert.equal(headCommand("/usr/bin/python3 -c 'print(1)'"), "python3");
    assert.equal(headCommand("./scripts/run_tests.sh --fast"), "run_tests.sh");
  });

  it("looks past env assignments and wrapper commands", () => {
    assert.equal(headCommand('PYTHONPATH=src DEBUG="a b" pytest -q'), "pytest");
    assert.equal(headCommand("sudo -u bob apt-get install -y jq"), "apt-get");
    assert.equal(headCommand("timeout 10 python run.py"), "python");
    assert.equal(headCommand("timeout -s KILL 30s ./build.sh"), "build.sh");
    assert.equal(headCommand("time cargo build --release"), "cargo");
    assert.equal(headCommand("cd /repo && CI=1 timeout 600 npm test"), "npm");
  });

  it("splits at pipes, semicolons, newlines and subshells", () => {
    assert.equal(headCommand("grep -rn TODO src | head -20"), "grep");
    assert.equal(headCommand("cd /testbed\ngit diff"), "git");
    assert.equal(headCommand("(cd build && cmake ..)"), "cmake");
  });

  it("does not split inside quotes", () => {
    assert.equal(headCommand('cd "my dir; x" && ls -la'), "ls");
    assert.equal(headCommand("cd 'a && b' && make"), "make");
  });

  it("ignores comments and joins continued lines", () => {
    assert.equal(headCommand("# run the failing test first\ncd /testbed\npytest -q"), "pytest");
    assert.equal(headCommand("cd /testbed \\\n  && make -j2"), "make");
  });

  it("reports the first command of a heredoc script", () => {
    assert.equal(
      headCommand("cat <<'EOF' > /tmp/repro.py\nimport os\nprint(os.getcwd())\nEOF\npython /tmp/repro.py"),
      "cat",
    );
  });

  it("returns null when nothing is run", () => {
    assert.equal(headCommand(""), null);
    assert.equal(headCommand("  \n # just a comment\n"), null);
    assert.equal(headCommand("FOO=1"), null);
  });
});
