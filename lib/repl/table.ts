/** A cell as a table prints it: null and undefined as "-", dates as ISO text. */
function cellText(value: unknown): string {
	if (value === null || value === undefined || value === "") return "-";
	if (value instanceof Date) return value.toISOString();
	return String(value).replace(/\s+/g, " ");
}

/**
 * A fixed-width text table: a header row, a rule, the rows, columns padded to their widest cell
 * (numbers right-aligned); "(none)" under the header when there is no row.
 */
export function formatTable(headers: string[], rows: unknown[][]): string {
	const cells = rows.map(row => headers.map((_, i) => cellText(row[i])));
	const numeric = headers.map(
		(_, i) =>
			rows.length > 0 && rows.every(row => row[i] === null || typeof row[i] === "number")
	);
	const widths = headers.map((h, i) => Math.max(h.length, ...cells.map(c => c[i].length)));
	const line = (values: string[]) =>
		values
			.map((v, i) => (numeric[i] ? v.padStart(widths[i]) : v.padEnd(widths[i])))
			.join("  ")
			.trimEnd();
	const out = [line(headers), widths.map(w => "-".repeat(w)).join("  ")];
	if (cells.length === 0) out.push("(none)");
	for (const c of cells) out.push(line(c));
	return out.join("\n");
}
