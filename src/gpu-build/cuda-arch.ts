// CUDA architectures as CMAKE_CUDA_ARCHITECTURES spells them: "90" for compute capability 9.0.

const COMPUTE_CAPABILITY = /^(\d+)\.(\d+)$/;
const ARCHITECTURE = /^\d{2,3}[af]?$/;

/**
 * The distinct architectures of the GPUs listed by
 * `nvidia-smi --query-gpu=compute_cap --format=csv,noheader` (one "9.0" line per GPU).
 */
export function archsFromComputeCaps(nvidiaSmiOutput: string): string[] {
  const lines = nvidiaSmiOutput
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.length > 0);
  if (lines.length === 0) throw new Error("nvidia-smi listed no GPU");
  return distinctSorted(
    lines.map((line) => {
      const match = COMPUTE_CAPABILITY.exec(line);
      if (!match) {
        throw new Error(`nvidia-smi printed "${line}" where a compute capability such as 9.0 was expected`);
      }
      return `${match[1]}${match[2]}`;
    }),
  );
}

/** An --arch value: "90", "9.0", or several joined by ';' or ','. */
export function parseArchOption(value: string): string[] {
  const parts = value
    .split(/[;,]/)
    .map((part) => part.trim())
    .filter((part) => part.length > 0);
  const expected = "expected CUDA architectures such as 90, 8.6 or 86;90";
  if (parts.length === 0) throw new Error(expected);
  return distinctSorted(
    parts.map((part) => {
      const capability = COMPUTE_CAPABILITY.exec(part);
      if (capability) return `${capability[1]}${capability[2]}`;
      if (ARCHITECTURE.test(part)) return part;
      throw new Error(expected);
    }),
  );
}

/**
 * CMAKE_CUDA_ARCHITECTURES with machine code only: PTX would be JIT-compiled by the driver, which fails when
 * the toolkit is newer than the driver (docs/gpu.md).
 */
export function cudaArchitecturesValue(archs: readonly string[]): string {
  return archs.map((arch) => `${arch}-real`).join(";");
}

function distinctSorted(archs: string[]): string[] {
  return [...new Set(archs)].sort((a, b) => Number.parseInt(a, 10) - Number.parseInt(b, 10));
}
