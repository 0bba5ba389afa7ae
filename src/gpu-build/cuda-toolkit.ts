// Versions of the CUDA toolkit and of the CUDA the driver supports, as their tools print them.

/** The line of `nvcc --version` naming the release ("Cuda compilation tools, release 13.0, V13.0.88"). */
export function nvccReleaseLine(nvccVersionOutput: string): string | undefined {
  return nvccVersionOutput
    .split("\n")
    .map((line) => line.trim())
    .find((line) => /\brelease \d+\.\d+/.test(line));
}

/** "13.0" from the banner of plain `nvidia-smi` ("CUDA Version: 13.0"). */
export function driverCudaVersion(nvidiaSmiOutput: string): string | undefined {
  return /CUDA Version:\s*(\d+\.\d+)/.exec(nvidiaSmiOutput)?.[1];
}

/** Whether the toolkit of `releaseLine` is newer than the driver's CUDA `driverVersion` ("13.0"). */
export function toolkitNewerThanDriver(releaseLine: string, driverVersion: string): boolean {
  const toolkit = versionParts(/\brelease (\d+\.\d+)/.exec(releaseLine)?.[1]);
  const driver = versionParts(driverVersion);
  if (!toolkit || !driver) return false;
  return toolkit[0] !== driver[0] ? toolkit[0] > driver[0] : toolkit[1] > driver[1];
}

function versionParts(version: string | undefined): [number, number] | undefined {
  const match = version ? /^(\d+)\.(\d+)$/.exec(version) : null;
  return match ? [Number(match[1]), Number(match[2])] : undefined;
}
