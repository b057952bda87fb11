import { execFileSync } from "child_process";
import fs from "fs";
import os from "os";
import path from "path";

/** scripts/build-changed.js: what `npm start` runs before node to bring dist/ up to date. */
const {
	buildChanged,
	sourceFiles,
	readTsconfig,
	MANIFEST
} = require("../../scripts/build-changed");

const ROOT = path.join(__dirname, "..", "..");

interface Built {
	transpiled: string[];
	removed: string[];
	unchanged: number;
}

describe("build-changed (dist/ brought up to date before a start)", () => {
	let root: string;
	const build = (): Promise<Built> => buildChanged(root);
	const write = (rel: string, text: string) => {
		fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
		fs.writeFileSync(path.join(root, rel), text);
	};
	const out = (rel: string) => path.join(root, "dist", rel);
	/** node's answer to `expr` on the built module `rel` (a process of its own: no module cache) */
	const run = (rel: string, expr: string) =>
		execFileSync(process.execPath, [
			"-e",
			`const m = require(${JSON.stringify(out(rel))}); process.stdout.write(String(${expr}))`
		]).toString();

	beforeEach(() => {
		root = fs.mkdtempSync(path.join(os.tmpdir(), "build-changed-"));
		write(
			"tsconfig.json",
			JSON.stringify({
				compilerOptions: {
					target: "ES2022",
					module: "node16",
					outDir: "dist",
					rootDir: ".",
					sourceMap: true
				},
				include: ["lib/**/*.ts", "services/**/*.ts", "main.ts"],
				exclude: ["node_modules", "dist"]
			})
		);
		write(
			"lib/greet.ts",
			`export function greet(name: string): string { return "hello " + name; }\n`
		);
		write("lib/types.d.ts", `export type Name = string;\n`);
		write("services/a.service.ts", `export default { name: "a" as const };\n`);
		write("services/b.service.ts", `export default { name: "b" as const };\n`);
		write(
			"main.ts",
			`import { greet } from "./lib/greet";\nexport const said: string = greet("world");\n`
		);
		write("scratch/not-included.ts", `export const x = 1;\n`);
	});

	afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

	it("builds everything into an absent dist/, then skips when nothing changed", async () => {
		const first = await build();
		expect(first.transpiled.sort()).toEqual([
			"lib/greet.ts",
			"main.ts",
			"services/a.service.ts",
			"services/b.service.ts"
		]);
		expect(run("main.js", "m.said")).toBe("hello world");
		expect(fs.existsSync(out("main.js.map"))).toBe(true);
		expect(fs.existsSync(out("lib/types.d.js"))).toBe(false);
		expect(fs.existsSync(out("scratch/not-included.js"))).toBe(false);
		expect(JSON.parse(fs.readFileSync(out("main.js.map"), "utf8")).sources).toEqual([
			"../main.ts"
		]);

		const mtime = fs.statSync(out("lib/greet.js")).mtimeMs;
		const manifest = fs.readFileSync(out(MANIFEST), "utf8");
		const again = await build();
		expect(again).toEqual({ transpiled: [], removed: [], unchanged: 4 });
		expect(fs.statSync(out("lib/greet.js")).mtimeMs).toBe(mtime);
		expect(fs.readFileSync(out(MANIFEST), "utf8")).toBe(manifest);
	});

	it("transpiles a changed file alone", async () => {
		await build();
		write(
			"lib/greet.ts",
			`export function greet(name: string): string { return "hi " + name; }\n`
		);
		const built = await build();
		expect(built.transpiled).toEqual(["lib/greet.ts"]);
		expect(built.unchanged).toBe(3);
		expect(run("main.js", "m.said")).toBe("hi world");
	});

	it("sees a file restored with an older mtime (a checkout, an rsync -t) as changed", async () => {
		await build();
		const before = fs.statSync(path.join(root, "lib/greet.ts"));
		write(
			"lib/greet.ts",
			`export function greet(name: string): string { return "howdy " + name; }\n`
		);
		const older = new Date(before.mtimeMs - 3600_000);
		fs.utimesSync(path.join(root, "lib/greet.ts"), older, older);
		expect((await build()).transpiled).toEqual(["lib/greet.ts"]);
		expect(run("main.js", "m.said")).toBe("howdy world");
	});

	it("removes the output of a deleted file, and builds an added one", async () => {
		await build();
		fs.rmSync(path.join(root, "services/b.service.ts"));
		write("services/c.service.ts", `export default { name: "c" as const };\n`);
		const built = await build();
		expect(built.transpiled).toEqual(["services/c.service.ts"]);
		expect(built.removed.sort()).toEqual([
			"services/b.service.js",
			"services/b.service.js.map"
		]);
		expect(fs.readdirSync(out("services")).sort()).toEqual([
			"a.service.js",
			"a.service.js.map",
			"c.service.js",
			"c.service.js.map"
		]);
		expect(await build()).toEqual({ transpiled: [], removed: [], unchanged: 4 });
	});

	it("removes a compiled file whose source never was (an older tsc's output), keeps other files", async () => {
		await build();
		write("dist/migrations/0001-gone.js", "exports.up = () => {};\n");
		write("dist/.tsbuildinfo", "{}");
		expect((await build()).removed).toEqual(["migrations/0001-gone.js"]);
		expect(fs.existsSync(out(".tsbuildinfo"))).toBe(true);
	});

	it("builds again an output deleted by hand", async () => {
		await build();
		fs.rmSync(out("services/a.service.js"));
		expect((await build()).transpiled).toEqual(["services/a.service.ts"]);
		expect(run("services/a.service.js", "m.default.name")).toBe("a");
	});

	it("fails on a file that does not parse, names it, and tries it again next time", async () => {
		await build();
		write("lib/greet.ts", `export function greet(name: string { return name; }\n`);
		await expect(build()).rejects.toThrow(/lib\/greet\.ts/);
		await expect(build()).rejects.toThrow(/lib\/greet\.ts/);
		write("lib/greet.ts", `export function greet(name: string) { return "ok " + name; }\n`);
		expect((await build()).transpiled).toEqual(["lib/greet.ts"]);
		expect(run("main.js", "m.said")).toBe("ok world");
	});

	it("transpiles everything again when the options change", async () => {
		await build();
		const config = JSON.parse(fs.readFileSync(path.join(root, "tsconfig.json"), "utf8"));
		config.compilerOptions.sourceMap = false;
		write("tsconfig.json", JSON.stringify(config));
		expect((await build()).transpiled).toHaveLength(4);
	});

	it("knows every TypeScript source of this project that tsc compiles", () => {
		// a source tsc reaches by an import from outside `include` would be missed
		const sources: Set<string> = sourceFiles(ROOT, readTsconfig(ROOT));
		const found: string[] = [];
		const walk = (rel: string) => {
			for (const entry of fs.readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
				const child = rel ? `${rel}/${entry.name}` : entry.name;
				if (entry.name.startsWith(".") || ["node_modules", "dist", "data"].includes(child))
					continue;
				if (entry.isDirectory()) walk(child);
				else if (child.endsWith(".ts") && !child.endsWith(".d.ts")) found.push(child);
			}
		};
		walk("");
		expect(found.filter(f => !sources.has(f))).toEqual([]);
		expect(sources.has("bin/start.ts")).toBe(true);
	});
});
