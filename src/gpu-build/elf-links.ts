import { isAbsolute, relative } from "node:path";

/** The parts of an ELF dynamic section that decide which libraries a plugin loads. */
export interface DynamicLinks {
  needed: string[];
  runpath: string[];
}

/** Reads `readelf -d` output: NEEDED entries, and RUNPATH (or RPATH) folders. */
export function parseReadelfDynamic(text: string): DynamicLinks {
  const needed: string[] = [];
  const runpath: string[] = [];
  for (const line of text.split("\n")) {
    const match = /\((NEEDED|RUNPATH|RPATH)\)\s+.*\[(.*)\]\s*$/.exec(line);
    if (!match) continue;
    if (match[1] === "NEEDED") needed.push(match[2]!);
    else runpath.push(...match[2]!.split(":").filter((dir) => dir.length > 0));
  }
  return { needed, runpath };
}

/** The engine has libggml-base.so loaded (the prebuilt one); the plugin must bind to that very library. */
const ENGINE_GGML_BASE = "libggml-base.so";

/**
 * Why the plugin would not use the engine's ggml-base, or undefined when it would: it must need exactly
 * libggml-base.so and must not search the build tree, where a second ggml-base lies.
 */
export function pluginLinkProblem(plugin: string, links: DynamicLinks, buildDir: string): string | undefined {
  const ggml = links.needed.filter((name) => name.startsWith("libggml"));
  if (!ggml.includes(ENGINE_GGML_BASE) || ggml.length !== 1) {
    return `${plugin} needs [${ggml.join(", ")}], not ${ENGINE_GGML_BASE} alone: it would not share the engine's ggml-base`;
  }
  const intoBuild = links.runpath.filter((dir) => {
    const rel = relative(buildDir, dir);
    return isAbsolute(dir) && !rel.startsWith("..") && !isAbsolute(rel);
  });
  if (intoBuild.length > 0) {
    return `${plugin} has RUNPATH ${intoBuild.join(":")} inside the build tree: it could load the build's ggml-base`;
  }
  return undefined;
}
