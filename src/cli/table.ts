/**
 * Plain-text tables for the CLI: a header row, columns padded with two spaces, no borders, so that the
 * output reads in a terminal and still works with `column`, `awk` or `grep`. Cells are made printable: a
 * transactional id may hold any character, and a control character must not rewrite the terminal.
 */

/** Control characters shown as `\xNN`, so one cell stays on one line and cannot move the cursor. */
export function printable(value: unknown): string {
  return String(value).replace(/[\u0000-\u001f\u007f-\u009f]/g, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/**
 * `rows` under `headers`; columns listed in `right` are right-aligned (numbers). Lines carry no trailing
 * spaces.
 */
export function renderTable(headers: readonly string[], rows: readonly (readonly unknown[])[], right: ReadonlySet<number> = new Set()): string {
  const cells = [headers.map(printable), ...rows.map((row) => row.map(printable))];
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? "").length)));
  const lines = cells.map((row) =>
    row
      .map((cell, i) => {
        if (i === row.length - 1 && !right.has(i)) return cell;
        return right.has(i) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!);
      })
      .join("  ")
      .trimEnd(),
  );
  return `${lines.join("\n")}\n`;
}

/** Label/value lines (`describe` output): labels padded to one width. */
export function renderFacts(facts: readonly (readonly [string, unknown])[]): string {
  const width = Math.max(...facts.map(([label]) => label.length));
  return facts.map(([label, value]) => `${label.padEnd(width)}  ${printable(value)}`).join("\n") + "\n";
}
