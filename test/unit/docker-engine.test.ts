import Docker from "dockerode";
import { requireTestDocker } from "../helpers/dockerd";

/**
 * The real Docker engine jest's globalSetup starts (test/helpers/dockerd.ts) runs the busybox
 * test image: a command's output and exit code, and a memory limit that kills.
 */

/** stdout and stderr of a container without a TTY: frames of an 8-byte header and a payload. */
function demux(raw: Buffer): { stdout: string; stderr: string } {
	const out = { stdout: "", stderr: "" };
	for (let at = 0; at + 8 <= raw.length;) {
		const size = raw.readUInt32BE(at + 4);
		const text = raw.subarray(at + 8, at + 8 + size).toString();
		if (raw[at] === 2) out.stderr += text;
		else out.stdout += text;
		at += 8 + size;
	}
	return out;
}

describe("the test Docker engine", () => {
	let docker: Docker;
	let image: string;
	const created: Docker.Container[] = [];

	beforeAll(() => {
		const engine = requireTestDocker();
		docker = new Docker({ socketPath: engine.socket });
		image = engine.image;
	});

	afterAll(async () => {
		await Promise.all(created.map(c => c.remove({ force: true }).catch(() => undefined)));
	});

	async function run(cmd: string[], hostConfig: Docker.HostConfig = {}) {
		const container = await docker.createContainer({
			Image: image,
			Cmd: cmd,
			HostConfig: { NetworkMode: "none", ...hostConfig }
		});
		created.push(container);
		await container.start();
		const { StatusCode } = await container.wait();
		const logs = (await container.logs({ stdout: true, stderr: true })) as unknown as Buffer;
		return { code: StatusCode, ...demux(logs), state: (await container.inspect()).State };
	}

	test("runs a command: its output and exit code 0", async () => {
		const ran = await run(["/bin/sh", "-c", "echo hi; id -un; ls -ld /tmp"]);
		expect(ran.code).toBe(0);
		expect(ran.stderr).toBe("");
		const [hi, user, tmp] = ran.stdout.trim().split("\n");
		expect([hi, user]).toEqual(["hi", "root"]);
		expect(tmp).toMatch(/^drwxrwxrwt /);
	});

	test("a command's exit code, and a user of the image's /etc/passwd", async () => {
		const ran = await run(["sh", "-c", "id -un >&2; exit 3"]);
		expect(ran.code).toBe(3);
		expect(ran.stderr).toBe("root\n");
		const nobody = await docker.createContainer({
			Image: image,
			User: "nobody",
			Cmd: ["sh", "-c", "id -un; touch /tmp/x"],
			HostConfig: { NetworkMode: "none" }
		});
		created.push(nobody);
		await nobody.start();
		expect((await nobody.wait()).StatusCode).toBe(0);
		const logs = (await nobody.logs({ stdout: true })) as unknown as Buffer;
		expect(demux(logs).stdout).toBe("nobody\n");
	});

	test("a container over its memory limit (--memory 32m) is OOMKilled", async () => {
		const limit = 32 * 1024 * 1024;
		const ran = await run(["sh", "-c", 'x=$(head -c 100000000 /dev/zero | tr "\\0" a)'], {
			Memory: limit,
			MemorySwap: limit
		});
		expect(ran.state.OOMKilled).toBe(true);
		expect(ran.code).toBe(137);
	});
});
