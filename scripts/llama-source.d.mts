/** source.json of an unpacked tree. */
export interface LlamaSourceMeta {
  nodeLlamaCppVersion: string;
  llamaCppTag: string;
  commit: string;
  patches: string[];
}

export function llamaSourceDir(root?: string): string;

export function ensureLlamaSource(options?: { root?: string; log?: (line: string) => void }): {
  dir: string;
  meta: LlamaSourceMeta;
};

export function removeStaleBuildDir(buildDir: string, sourceDir: string): void;

/** -DCMAKE_C_FLAGS=... / -DCMAKE_CXX_FLAGS=... that native x86 builds of the tree need with this compiler. */
export function compilerWorkarounds(cxxVersionText: string, acceptsNoAvx512Fp16: boolean): string[];
