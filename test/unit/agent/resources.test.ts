import fs from "fs";
import os from "os";
import path from "path";
import { measureResources, readSlaveId } from "../../../lib/agent/resources";
import { removeTempDirs, tempDir } from "../../fixtures/agent";

afterAll(() => removeTempDirs());

describe("readSlaveId", () => {
	it("creates a UUID once and answers it ever after", async () => {
		const dir = path.join(tempDir("slave"), "not", "yet");
		const first = await readSlaveId(dir);
		expect(first).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
		expect(await readSlaveId(dir)).toBe(first);
		expect(fs.readFileSync(path.join(dir, "slave_id"), "utf8")).toBe(`${first}\n`);
		expect(fs.readdirSync(dir)).toEqual(["slave_id"]);
	});

	it("agrees with itself when called concurrently", async () => {
		const dir = tempDir("slave");
		const ids = await Promise.all(Array.from({ length: 8 }, () => readSlaveId(dir)));
		expect(new Set(ids).size).toBe(1);
	});

	it("refuses a file that does not hold a UUID", async () => {
		const dir = tempDir("slave");
		fs.writeFileSync(path.join(dir, "slave_id"), "garbage");
		await expect(readSlaveId(dir)).rejects.toThrow(/holds "garbage", not a UUID/);
	});
});

describe("measureResources", () => {
	it("offers the machine's CPUs, memory and free disk", async () => {
		const dir = tempDir("res");
		const free = fs.statfsSync(dir);
		const resources = await measureResources(dir, { cpus: null, memMiB: null, diskMiB: null });
		expect(resources.cpus).toBe(os.cpus().length);
		expect(resources.mem).toBe(Math.floor(os.totalmem() / 1024 / 1024));
		const disk = Math.floor((free.bavail * free.bsize) / 1024 / 1024);
		expect(Math.abs(resources.disk - disk)).toBeLessThan(64);
	});

	it("caps each by configuration", async () => {
		const resources = await measureResources(tempDir("res"), {
			cpus: 0.5,
			memMiB: 100,
			diskMiB: 1
		});
		expect(resources).toEqual({ cpus: 0.5, mem: 100, disk: 1 });
		const above = await measureResources(tempDir("res"), {
			cpus: 100000,
			memMiB: 1e12,
			diskMiB: null
		});
		expect(above.cpus).toBe(os.cpus().length);
		expect(above.mem).toBe(Math.floor(os.totalmem() / 1024 / 1024));
	});
});
