import { Command } from "commander";
import { createPolicy, POLICY_NAMES } from "../policies/index.js";

export function policiesCommand(): Command {
  return new Command("policies").description("list the scheduling policies").action(() => {
    const width = Math.max(...POLICY_NAMES.map((n) => n.length));
    for (const name of POLICY_NAMES) {
      const policy = createPolicy(name);
      process.stdout.write(`${name.padEnd(width)}  ${policy.description}\n`);
    }
  });
}
