import fs from "fs";

export default async function globalTeardown() {
	const pg = (globalThis as any).__SCALE_PG__;
	const dockerd = (globalThis as any).__SCALE_DOCKERD__;
	await Promise.all([pg?.stop(), dockerd?.stop()]);
	const dir = (globalThis as any).__SCALE_TEST_DIR__;
	if (dir) fs.rmSync(dir, { recursive: true, force: true });
}
