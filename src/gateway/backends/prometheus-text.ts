/** Prometheus text exposition as backends write it: each family's `# TYPE` and every sample with its labels. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

export interface Exposition {
  /** family name -> counter, gauge, histogram, summary, untyped */
  readonly types: ReadonlyMap<string, string>;
  readonly samples: readonly Sample[];
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function unescapeLabel(value: string): string {
  return value.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    if (line.startsWith("#")) {
      const type = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (type) types.set(type[1] as string, type[2] as string);
      continue;
    }
    const sample = SAMPLE_LINE.exec(line);
    if (!sample) continue;
    const labels: Record<string, string> = {};
    for (const m of (sample[2] ?? "").matchAll(LABEL)) labels[m[1] as string] = unescapeLabel(m[2] as string);
    const value = Number(sample[3]);
    if (!Number.isNaN(value) || sample[3] === "NaN")
      samples.push({ name: sample[1] as string, labels, value });
  }
  return { types, samples };
}

/** The family a sample belongs to: a histogram's `_bucket`, `_sum`, `_count` (and a counter's `_total`) named by its TYPE. */
export function familyOf(name: string, types: ReadonlyMap<string, string>): string {
  if (types.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count", "_total", "_created"]) {
    if (name.endsWith(suffix) && types.has(name.slice(0, -suffix.length)))
      return name.slice(0, -suffix.length);
  }
  return name;
}
