import fs from "fs";

/** The first ```sh block after each heading of README.md, in order. */
export function readmeBlocks(
	headings: string[],
	readme = fs.readFileSync("README.md", "utf8")
): string[] {
	const lines = readme.split("\n");
	return headings.map(heading => {
		const at = lines.indexOf(heading);
		if (at < 0) throw new Error(`README.md has no "${heading}"`);
		const start = lines.indexOf("```sh", at);
		const end = lines.indexOf("```", start + 1);
		const next = lines.findIndex((line, i) => i > at && /^#{1,3} /.test(line));
		if (start < 0 || end < 0 || (next >= 0 && start > next))
			throw new Error(`"${heading}" has no sh block`);
		return lines.slice(start + 1, end).join("\n");
	});
}

/** Every ```sh block of README.md, in order. */
export function readmeShellBlocks(readme = fs.readFileSync("README.md", "utf8")): string[] {
	return [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map(m => m[1]);
}
