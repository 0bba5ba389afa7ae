/**
 * A plain-text table: columns as wide as their widest cell, two spaces apart, numbers right-aligned. The
 * first column holds a label (left-aligned) unless `labelColumn` is false.
 */
export function formatTextTable(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  { labelColumn = true }: { labelColumn?: boolean } = {},
): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (labelColumn && i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join("  ");
  return [line(head), ...rows.map(line)].join("\n");
}
