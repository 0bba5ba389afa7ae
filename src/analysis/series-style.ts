/**
 * One look per series (policy or run) across a report: a colour, a marker and a dash pattern, so that
 * two policies with identical curves (continuum-heuristic and cachettl at light load) still show as two.
 * Colours are Okabe-Ito's colour-blind-safe set without its yellow (unreadable on white), then Tol's.
 */
const COLOURS = [
  "#0072B2",
  "#D55E00",
  "#009E73",
  "#CC79A7",
  "#E69F00",
  "#56B4E9",
  "#000000",
  "#882255",
  "#999999",
  "#117733",
  "#44AA99",
  "#AA4499",
] as const;
/** Vega's symbol shapes, in an order where neighbours differ most. */
const MARKERS = [
  "circle",
  "square",
  "triangle-up",
  "diamond",
  "cross",
  "triangle-down",
  "triangle-right",
  "triangle-left",
] as const;
const DASHES: readonly (readonly number[])[] = [
  [1, 0],
  [6, 3],
  [2, 2],
  [8, 3, 2, 3],
];

export interface SeriesStyle {
  readonly colour: string;
  readonly marker: string;
  readonly dash: readonly number[];
}

/** Styles for the labels in order of first appearance (the same label always gets the same style). */
export function seriesStyles(labels: readonly string[]): Map<string, SeriesStyle> {
  const styles = new Map<string, SeriesStyle>();
  for (const label of labels) {
    if (styles.has(label)) continue;
    const i = styles.size;
    styles.set(label, {
      colour: COLOURS[i % COLOURS.length] as string,
      marker: MARKERS[i % MARKERS.length] as string,
      dash: DASHES[i % DASHES.length] as readonly number[],
    });
  }
  return styles;
}
