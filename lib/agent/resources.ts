import crypto from "crypto";
import fs from "fs";
import os from "os";
import path from "path";
import type { Resources } from "../documents/agent-protocol";

const MiB = 1024 * 1024;

/** Caps on what the agent offers (null = what the machine has); AgentConfig's fields. */
export interface ResourceCaps {
	cpus: number | null;
	memMiB: number | null;
	diskMiB: number | null;
}

function capped(value: number, cap: number | null): number {
	return cap === null ? value : Math.min(value, cap);
}

/**
 * What this node offers: its CPUs, its total memory (MiB) and the space free to unprivileged
 * users on the file system of `workDir` (MiB), each capped by configuration. `workDir` is
 * created when missing.
 */
export async function measureResources(workDir: string, caps: ResourceCaps): Promise<Resources> {
	await fs.promises.mkdir(workDir, { recursive: true });
	const stats = await fs.promises.statfs(workDir);
	return {
		cpus: capped(os.cpus().length, caps.cpus),
		mem: capped(Math.floor(os.totalmem() / MiB), caps.memMiB),
		disk: capped(Math.floor((Number(stats.bavail) * Number(stats.bsize)) / MiB), caps.diskMiB)
	};
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The node's stable slave id: the UUID kept in `<workDir>/slave_id`, created the first time
 * (exclusively, so two agents started together on one work directory agree). A file holding
 * anything but a UUID is an error for the operator to look at, not something to overwrite.
 */
export async function readSlaveId(workDir: string): Promise<string> {
	await fs.promises.mkdir(workDir, { recursive: true });
	const file = path.join(workDir, "slave_id");
	if (!fs.existsSync(file)) {
		// written aside and linked into place: a reader never sees a half-written file
		const temp = `${file}.${process.pid}.${crypto.randomBytes(4).toString("hex")}`;
		await fs.promises.writeFile(temp, `${crypto.randomUUID()}\n`);
		try {
			await fs.promises.link(temp, file);
		} catch (error: any) {
			if (error?.code !== "EEXIST") throw error;
		} finally {
			await fs.promises.unlink(temp);
		}
	}
	const id = (await fs.promises.readFile(file, "utf8")).trim();
	if (!UUID.test(id))
		throw new Error(
			`${file} holds "${id.slice(0, 60)}", not a UUID; remove it to make a new one`
		);
	return id;
}
