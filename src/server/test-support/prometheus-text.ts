/** Prometheus text exposition, read back for tests: each family's `# TYPE` and every sample with its labels. */
export interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

export function parsePrometheus(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1] as string, type[2] as string);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!sample) continue;
    const labels: Record<string, string> = {};
    for (const m of (sample[2] ?? "").matchAll(/([a-zA-Z_]+)="([^"]*)"/g))
      labels[m[1] as string] = m[2] as string;
    samples.push({ name: sample[1] as string, labels, value: Number(sample[3]) });
  }
  return { types, samples };
}
