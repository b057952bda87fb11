import fs from "fs";

export default async function globalTeardown() {
	const pg = (globalThis as any).__SCALE_PG__;
	if (pg) await pg.stop();
	const dir = (globalThis as any).__SCALE_TEST_DIR__;
	if (dir) fs.rmSync(dir, { recursive: true, force: true });
}
