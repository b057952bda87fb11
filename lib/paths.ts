import fs from "fs";
import path from "path";

/** The project's root folder, found from here whether running from source or from dist/. */
export const PROJECT_ROOT = (() => {
	let dir = __dirname;
	while (!fs.existsSync(path.join(dir, "package.json"))) {
		const up = path.dirname(dir);
		if (up === dir) throw new Error("package.json not found above " + __dirname);
		dir = up;
	}
	return dir;
})();

export const VERSION: string = JSON.parse(
	fs.readFileSync(path.join(PROJECT_ROOT, "package.json"), "utf8")
).version;

/** True when `child` is `parent` or lies under it (both absolute and normalised). */
export function isInside(parent: string, child: string): boolean {
	const rel = path.relative(parent, child);
	return rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}
