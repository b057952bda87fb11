"use strict";
/**
 * Data for scripts/scale-ui-check.js: job types, jobs (some failing), a recipe, an ingest through
 * a strike, and today's daily metrics, made through the service's API and its REPL socket.
 */
const fs = require("fs");
const net = require("net");
const os = require("os");
const path = require("path");

/** A function that calls the service's API at `api`, answering the JSON it answers. */
function apiCaller(api) {
	return async function call(method, route, body) {
		const res = await fetch(`${api}/api${route}`, {
			method,
			headers: body ? { "content-type": "application/json" } : {},
			body: body ? JSON.stringify(body) : undefined
		});
		const text = await res.text();
		if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
		return text ? JSON.parse(text) : null;
	};
}

async function until(what, probe) {
	for (let i = 0; i < 600; i++) {
		const value = await probe();
		if (value) return value;
		await new Promise(resolve => setTimeout(resolve, 250));
	}
	throw new Error(`gave up waiting for ${what}`);
}

/** One action of the service through its REPL socket (one JSON line each way). */
function replCall(dataDir, action, params) {
	return new Promise((resolve, reject) => {
		const socket = net.connect(path.join(dataDir, "repl.sock"));
		let buffer = "";
		socket.on("error", reject);
		socket.on("data", chunk => {
			buffer += chunk;
			const end = buffer.indexOf("\n");
			if (end < 0) return;
			const answer = JSON.parse(buffer.slice(0, end));
			socket.end();
			if (answer.error) reject(new Error(answer.error.message));
			else resolve(answer.result);
		});
		socket.write(`${JSON.stringify({ id: 1, action, params })}\n`);
	});
}

/** Job types, jobs (some failing), an ingest, and today's metrics; answers the names made. */
async function seed(call, dataDir) {
	const tag = Date.now().toString(36);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "scale-ui-seed-"));
	fs.chmodSync(dir, 0o755);
	for (const sub of ["ws", "incoming"]) fs.mkdirSync(path.join(dir, sub), { mode: 0o777 });
	const script = (name, text) => {
		fs.writeFileSync(path.join(dir, name), `#!/bin/sh\n${text}\n`, { mode: 0o755 });
		return path.join(dir, name);
	};
	const ok = script("ok.sh", 'echo "done $1" > "$2/out.txt"\necho "ARTIFACT:out:$2/out.txt"');
	const bad = script("bad.sh", "echo failing >&2\nexit 3");
	const ws = await call("POST", "/workspaces/", {
		name: `ui-check-${tag}`,
		title: `UI check ${tag}`,
		json_config: { version: "1.0", broker: { type: "host", host_path: path.join(dir, "ws") } }
	});
	const jobType = (name, title, command, outputs) =>
		call("POST", "/job-types/", {
			name: `${name}-${tag}`,
			version: "1.0",
			title,
			cpus_required: 0.1,
			mem_required: 16,
			interface: {
				command,
				command_arguments: outputs ? '"${name}" ${job_output_dir}' : "",
				input_data: [{ name: "name", type: "property" }],
				output_data: outputs
					? [{ name: "out", type: "file", media_type: "text/plain" }]
					: []
			}
		});
	const okType = await jobType("ui-ok", `UI OK ${tag}`, ok, true);
	const badType = await jobType("ui-bad", `UI Bad ${tag}`, bad, false);
	const jobs = [];
	for (const [type, n] of [
		[okType, 3],
		[badType, 2]
	]) {
		for (let i = 0; i < n; i++) {
			const body = {
				job_type_id: type.id,
				job_data: {
					input_data: [{ name: "name", value: `n${i}` }],
					output_data: type === okType ? [{ name: "out", workspace_id: ws.id }] : []
				}
			};
			jobs.push((await call("POST", "/queue/new-job/", body)).id);
		}
	}
	for (const id of jobs) {
		await until(`job ${id} to end`, async () =>
			["COMPLETED", "FAILED", "CANCELED"].includes((await call("GET", `/jobs/${id}/`)).status)
		);
	}
	const strike = await call("POST", "/strike/create/", {
		name: `ui-check-${tag}`,
		title: `UI check ${tag}`,
		configuration: {
			mount: path.join(dir, "incoming"),
			transfer_suffix: "_tmp",
			files_to_ingest: [
				{
					filename_regex: ".*\\.txt$",
					data_types: ["notes"],
					workspace_path: "notes",
					workspace_name: ws.name
				}
			]
		}
	});
	const recipeType = await call("POST", "/recipe-types/", {
		name: `ui-twice-${tag}`,
		version: "1.0",
		title: `UI Twice ${tag}`,
		definition: {
			version: "1.0",
			input_data: [{ name: "who", type: "property" }],
			jobs: [
				{
					name: "first",
					job_type: { name: okType.name, version: "1.0" },
					recipe_inputs: [{ recipe_input: "who", job_input: "name" }]
				},
				{
					name: "second",
					job_type: { name: okType.name, version: "1.0" },
					recipe_inputs: [{ recipe_input: "who", job_input: "name" }],
					dependencies: [{ name: "first", connections: [] }]
				}
			]
		}
	});
	const recipe = await call("POST", "/queue/new-recipe/", {
		recipe_type_id: recipeType.id,
		recipe_data: { input_data: [{ name: "who", value: "ui" }], workspace_id: ws.id }
	});
	await until(
		`recipe ${recipe.id} to complete`,
		async () => (await call("GET", `/recipes/${recipe.id}/`)).completed
	);
	const file = `ui-check-${tag}.txt`;
	fs.writeFileSync(path.join(dir, "incoming", `${file}_tmp`), "hello\n");
	fs.renameSync(path.join(dir, "incoming", `${file}_tmp`), path.join(dir, "incoming", file));
	await until(`${file} to be ingested`, async () => {
		const list = await call("GET", `/ingests/?file_name=${file}`);
		return list.results.some(r => r.status === "INGESTED");
	});
	const day = new Date().toISOString().slice(0, 10);
	const rows = await replCall(dataDir, "metrics.compute", { day });
	console.log(
		`seeded: job types ${okType.id}, ${badType.id}; jobs ${jobs.join(", ")}; strike ${strike.strike_id}; recipe ${recipe.id}; ingest of ${file}; metrics of ${day}: ${JSON.stringify(rows)}`
	);
	const failed = await call("GET", `/jobs/${jobs[jobs.length - 1]}/`);
	return {
		jobTypes: [okType.name, badType.name],
		strike: `ui-check-${tag}`,
		errors: [failed.error && failed.error.name]
	};
}

module.exports = { apiCaller, seed };
