import { promises as fs } from "fs";
import type { Sequelize } from "sequelize";
import { select, write, type Sql, transaction } from "../db/run";
import {
	parseStrikeConfiguration,
	STRIKE_JOB_TYPE,
	workspaceNamesIn,
	type StrikeConfiguration,
	type StrikeMountOptions
} from "../documents/strike-configuration";
import type { Warning } from "../documents/types";
import { BadRequestError, FieldError, NotFoundError } from "../errors";
import type { ListSource } from "../list/types";
import { loadStrikeJobs, serializeStrike, type StrikeRow } from "../records/ingest";
import { queueNewJobs } from "../jobs/new-job";
import { mountProblem, type ServiceDirectories } from "../documents/confined-mounts";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import { watchedDirectory } from "./record";
import { keepMaskedSecret } from "../documents/s3-broker";
import {
	isS3StrikeConfiguration,
	maskStrikeSecrets,
	parseS3StrikeConfiguration,
	s3StrikeWorkspaces,
	type S3StrikeConfiguration
} from "../documents/strike-s3";
import {
	dirWatcherWorkspaces,
	isDirWatcherConfiguration,
	parseDirWatcherConfiguration,
	type DirWatcherStrikeConfiguration
} from "../documents/strike-dir-watcher";

/** Any configuration a strike may have: 1.0, or 2.0 with an s3 or a dir-watcher monitor. */
export type AnyStrikeConfiguration =
	StrikeConfiguration | S3StrikeConfiguration | DirWatcherStrikeConfiguration;

const NAME_MAX = 50;
const TITLE_MAX = 50;
const DESCRIPTION_MAX = 500;

const CREATE_SCHEMA = {
	type: "object",
	required: ["name", "configuration"],
	properties: {
		name: { type: "string", minLength: 1, maxLength: NAME_MAX },
		title: { type: ["string", "null"], maxLength: TITLE_MAX },
		description: { type: ["string", "null"], maxLength: DESCRIPTION_MAX },
		configuration: { type: "object" }
	}
};

const EDIT_SCHEMA = {
	type: "object",
	properties: {
		title: { type: ["string", "null"], maxLength: TITLE_MAX },
		description: { type: ["string", "null"], maxLength: DESCRIPTION_MAX },
		configuration: { type: "object" }
	}
};

const checkCreate = compileChecker(CREATE_SCHEMA);
const checkEdit = compileChecker(EDIT_SCHEMA);

export interface NewStrike {
	name: string;
	title: string | null;
	description: string | null;
	configuration: AnyStrikeConfiguration;
}

export interface StrikeEdit {
	title?: string | null;
	description?: string | null;
	configuration?: AnyStrikeConfiguration;
}

/** How strikes' directories are resolved on this cluster, and the service's own directories. */
export type StrikeOptions = StrikeMountOptions &
	ServiceDirectories & {
		/** false in a cluster: the directory is on the agents, perhaps not on this host */
		checkMounts?: boolean;
	};

/**
 * A create body, parsed and its directory checked (checkWatchedDirectory, missingDirectory);
 * throws FieldError. With `warnings` (validation), a directory missing is one of them instead.
 */
export async function parseNewStrike(
	body: unknown,
	options: StrikeOptions,
	warnings?: Warning[]
): Promise<NewStrike> {
	assertSchema(checkCreate, body, "");
	const given = body as Record<string, unknown>;
	checkStorableText({ name: given.name, title: given.title, description: given.description }, "");
	return {
		name: given.name as string,
		title: (given.title as string | null | undefined) ?? null,
		description: (given.description as string | null | undefined) ?? null,
		configuration: await parseConfiguration(given.configuration, options, warnings)
	};
}

/** An edit body, parsed: only the fields given change. */
export async function parseStrikeEdit(body: unknown, options: StrikeOptions): Promise<StrikeEdit> {
	assertSchema(checkEdit, body, "");
	const given = body as Record<string, unknown>;
	checkStorableText({ title: given.title, description: given.description }, "");
	const edit: StrikeEdit = {};
	if (given.title !== undefined) edit.title = given.title as string | null;
	if (given.description !== undefined) edit.description = given.description as string | null;
	if (given.configuration !== undefined)
		edit.configuration = await parseConfiguration(given.configuration, options);
	return edit;
}

/**
 * A configuration parsed, its watched directory checked (2.0: its monitor's shape; a
 * dir-watcher's directory is its workspace's, checked when the workspace was saved).
 */
async function parseConfiguration(
	doc: unknown,
	options: StrikeOptions,
	warnings?: Warning[]
): Promise<AnyStrikeConfiguration> {
	if (isDirWatcherConfiguration(doc)) return parseDirWatcherConfiguration(doc, "configuration");
	if (isS3StrikeConfiguration(doc)) return parseS3StrikeConfiguration(doc, "configuration");
	const config = parseStrikeConfiguration(doc, "configuration", options);
	await checkWatchedDirectory(
		config,
		(doc as { mount_on?: string }).mount_on !== undefined,
		options
	);
	const missing = options.checkMounts === false ? null : await missingDirectory(config);
	if (missing !== null && warnings === undefined)
		throw new FieldError("configuration.mount", missing);
	if (missing !== null)
		warnings!.push({ id: "mount", details: `configuration.mount: ${missing}` });
	return config;
}

/**
 * Why a strike's `mount`, a directory of this host, cannot be watched (it is not there, or not a
 * directory), or null. A `mount_on` (where the operator mounts a network export, perhaps not yet)
 * is not checked: the strike's job fails with that reason if it is still missing when it runs.
 */
async function missingDirectory(config: StrikeConfiguration): Promise<string | null> {
	if (config.mount_on !== undefined) return null;
	try {
		const stat = await fs.stat(config.mount);
		return stat.isDirectory() ? null : `"${config.mount}" is not a directory`;
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code;
		if (code === "ENOENT" || code === "ENOTDIR")
			return `"${config.mount}" does not exist on this node; a strike watches a directory, it creates none`;
		return `"${config.mount}" cannot be read (${code})`;
	}
}

/**
 * Refuses a configuration whose monitor would watch a system directory or one of the service's
 * own (lib/documents/confined-mounts.ts), naming the field the client gave the directory in:
 * `mount_on`, else `mount` (a path, or an export that NFS_MOUNT_ROOT maps to one). A `mount`
 * beside `mount_on` is not checked: it only records what the operator mounted there (an export,
 * a device under /dev), which the service never opens.
 */
async function checkWatchedDirectory(
	config: StrikeConfiguration,
	mountOnGiven: boolean,
	own: ServiceDirectories
): Promise<void> {
	const problem = await mountProblem(watchedDirectory(config), own);
	if (problem)
		throw new FieldError(
			`configuration.${mountOnGiven ? "mount_on" : "mount"}`,
			`${problem}; a strike may not watch it`
		);
}

/**
 * Checks that every workspace the configuration stores files in exists, is active and is a host
 * workspace (the monitor moves files into its directory). Answers warnings: none so far, the
 * place Scale's validation view gives them.
 */
export async function checkStrikeWorkspaces(
	db: Sequelize,
	config: AnyStrikeConfiguration,
	t?: Sql
): Promise<Warning[]> {
	if (isDirWatcherConfiguration(config)) return checkDirWatcherWorkspaces(db, config, t);
	if (isS3StrikeConfiguration(config)) return checkS3StrikeWorkspaces(db, config, t);
	const names = workspaceNamesIn(config);
	const rows = await select<{ name: string; is_active: boolean; host_path: string | null }>(
		db,
		`SELECT name, is_active, (CASE WHEN json_config->'broker'->>'type' <> 's3' THEN json_config->'broker'->>'host_path' END) AS host_path
		 FROM workspace WHERE name = ANY($1::text[])`,
		[names],
		t
	);
	const byName = new Map(rows.map(row => [row.name, row]));
	config.files_to_ingest.forEach((rule, i) => {
		const at = `configuration.files_to_ingest[${i}].workspace_name`;
		const found = byName.get(rule.workspace_name);
		if (!found)
			throw new FieldError(at, `"${rule.workspace_name}" is not the name of a workspace`);
		if (!found.is_active)
			throw new FieldError(at, `the workspace "${rule.workspace_name}" is not active`);
		if (!found.host_path)
			throw new FieldError(
				at,
				`the workspace "${rule.workspace_name}" is not a host workspace: the monitor moves files into a directory`
			);
	});
	return [];
}

/**
 * A 2.0 configuration's workspaces: each exists, is active and is an s3 workspace (its objects
 * are ingested where they are, or copied within the store).
 */
async function checkS3StrikeWorkspaces(
	db: Sequelize,
	config: S3StrikeConfiguration,
	t?: Sql
): Promise<Warning[]> {
	const rows = await select<{ name: string; is_active: boolean; type: string | null }>(
		db,
		`SELECT name, is_active, json_config->'broker'->>'type' AS type
		 FROM workspace WHERE name = ANY($1::text[])`,
		[s3StrikeWorkspaces(config)],
		t
	);
	const byName = new Map(rows.map(row => [row.name, row]));
	const check = (name: string, at: string) => {
		const found = byName.get(name);
		if (!found) throw new FieldError(at, `"${name}" is not the name of a workspace`);
		if (!found.is_active) throw new FieldError(at, `the workspace "${name}" is not active`);
		if (found.type !== "s3")
			throw new FieldError(at, `the workspace "${name}" is not an s3 workspace`);
	};
	check(config.workspace, "configuration.workspace");
	config.files_to_ingest.forEach((rule, i) => {
		if (rule.new_workspace)
			check(rule.new_workspace, `configuration.files_to_ingest[${i}].new_workspace`);
	});
	return [];
}

/**
 * A 2.0 dir-watcher's workspaces: each exists, is active and is a host workspace (the watched
 * one's directory is watched, and files are moved into each one's directory).
 */
async function checkDirWatcherWorkspaces(
	db: Sequelize,
	config: DirWatcherStrikeConfiguration,
	t?: Sql
): Promise<Warning[]> {
	const rows = await select<{ name: string; is_active: boolean; host_path: string | null }>(
		db,
		`SELECT name, is_active, (CASE WHEN json_config->'broker'->>'type' <> 's3' THEN json_config->'broker'->>'host_path' END) AS host_path
		 FROM workspace WHERE name = ANY($1::text[])`,
		[dirWatcherWorkspaces(config)],
		t
	);
	const byName = new Map(rows.map(row => [row.name, row]));
	const check = (name: string, at: string) => {
		const found = byName.get(name);
		if (!found) throw new FieldError(at, `"${name}" is not the name of a workspace`);
		if (!found.is_active) throw new FieldError(at, `the workspace "${name}" is not active`);
		if (!found.host_path)
			throw new FieldError(
				at,
				`the workspace "${name}" is not a host workspace: a dir-watcher watches and fills directories`
			);
	};
	check(config.workspace, "configuration.workspace");
	config.files_to_ingest.forEach((rule, i) => {
		if (rule.new_workspace)
			check(rule.new_workspace, `configuration.files_to_ingest[${i}].new_workspace`);
	});
	return [];
}

/** POST /strikes/validation/: the whole create body checked, nothing saved. */
export async function validateStrike(
	db: Sequelize,
	body: unknown,
	options: StrikeOptions
): Promise<{ warnings: Warning[] }> {
	const warnings: Warning[] = [];
	const strike = await parseNewStrike(body, options, warnings);
	return { warnings: [...warnings, ...(await checkStrikeWorkspaces(db, strike.configuration))] };
}

/**
 * Saves a strike and queues its process: a STRIKE_CREATED trigger event (processed: nothing
 * else reacts to it), the `scale-strike` job with the strike's id as its input, and the strike's
 * `job_id`, all in one transaction. A name taken is a 400 on `name`. Answers the ids and the job's
 * execution (for the caller's `queue.changed`).
 */
export async function createStrike(
	db: Sequelize,
	strike: NewStrike
): Promise<{ strikeId: number; jobId: number }> {
	return transaction(db, async t => {
		await checkStrikeWorkspaces(db, strike.configuration, t);
		const [row] = await write<{ id: number }>(
			db,
			`INSERT INTO strike (name, title, description, configuration)
			 VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT (name) DO NOTHING RETURNING id`,
			[strike.name, strike.title, strike.description, JSON.stringify(strike.configuration)],
			t
		);
		if (!row) throw new FieldError("name", `a strike named "${strike.name}" already exists`);
		const jobId = await queueStrikeJob(db, t, row.id);
		return { strikeId: row.id, jobId };
	});
}

/** Queues a strike's process and links it to the strike; answers the job's id. */
async function queueStrikeJob(db: Sequelize, t: Sql, strikeId: number): Promise<number> {
	const [type] = await select<{ id: number }>(
		db,
		`SELECT id FROM job_type WHERE name = $1 AND is_system AND is_active
		 ORDER BY id DESC LIMIT 1`,
		[STRIKE_JOB_TYPE],
		t
	);
	if (!type)
		throw new BadRequestError(
			`the system job type "${STRIKE_JOB_TYPE}" is missing or archived: strikes cannot run`
		);
	const [event] = await write<{ id: number }>(
		db,
		`INSERT INTO trigger_event (type, description, processed)
		 VALUES ('STRIKE_CREATED', jsonb_build_object('version', '1.0', 'strike_id', $1::int), now())
		 RETURNING id`,
		[strikeId],
		t
	);
	const [queued] = await queueNewJobs(db, t, [
		{
			jobTypeId: type.id,
			eventId: event.id,
			jobData: {
				version: "1.0",
				input_data: [{ name: "Strike ID", value: String(strikeId) }],
				output_data: []
			}
		}
	]);
	await write(
		db,
		`UPDATE strike SET job_id = $2 WHERE id = $1 RETURNING id`,
		[strikeId, queued.jobId],
		t
	);
	return queued.jobId;
}

/**
 * Edits a strike's title, description or configuration; answers whether the configuration
 * changed (the running monitor is then told). 404 for an unknown strike.
 */
export async function updateStrike(db: Sequelize, id: number, edit: StrikeEdit): Promise<boolean> {
	return transaction(db, async t => {
		if (edit.configuration) await checkStrikeWorkspaces(db, edit.configuration, t);
		if (isS3StrikeConfiguration(edit.configuration)) {
			const [stored] = await select<{ configuration: S3StrikeConfiguration }>(
				db,
				"SELECT configuration FROM strike WHERE id = $1",
				[id],
				t
			);
			edit.configuration.monitor = keepMaskedSecret(
				edit.configuration.monitor,
				stored?.configuration.monitor
			) as S3StrikeConfiguration["monitor"];
		}
		const sets: string[] = [];
		const binds: unknown[] = [id];
		const set = (column: string, value: unknown, cast = "") => {
			binds.push(value);
			sets.push(`${column} = $${binds.length}${cast}`);
		};
		if (edit.title !== undefined) set("title", edit.title);
		if (edit.description !== undefined) set("description", edit.description);
		if (edit.configuration) set("configuration", JSON.stringify(edit.configuration), "::jsonb");
		sets.push("last_modified = now()");
		const [row] = await write(
			db,
			`UPDATE strike SET ${sets.join(", ")} WHERE id = $1 RETURNING id`,
			binds,
			t
		);
		if (!row) throw new NotFoundError(`No strike with id ${id}`);
		return edit.configuration !== undefined;
	});
}

interface StrikeDetailsRow extends StrikeRow {
	configuration: Record<string, unknown>;
}

/** GET /strikes/{id}/: the strike with its job's summary and its configuration. */
export async function getStrikeDetails(db: Sequelize, id: number) {
	const [row] = await select<StrikeDetailsRow>(db, `SELECT * FROM strike WHERE id = $1`, [id]);
	if (!row) throw new NotFoundError(`No strike with id ${id}`);
	return {
		...serializeStrike(row, await loadStrikeJobs(db, [row])),
		configuration: maskStrikeSecrets(row.configuration)
	};
}

const STRIKE_FIELDS = ["id", "name", "title", "description", "job_id", "created", "last_modified"];

/** GET /strikes/ (Scale's StrikesView): name repeatable, ordered by name unless told otherwise. */
export const STRIKE_LIST: ListSource = {
	from: "strike",
	columns: STRIKE_FIELDS.join(", "),
	orderable: Object.fromEntries(STRIKE_FIELDS.filter(f => f !== "job_id").map(f => [f, f])),
	defaultOrder: ["name"],
	timeColumn: "last_modified",
	filters: { name: { column: "name", type: "string" } }
};

/** Strike list rows with their jobs' summaries. */
export async function serializeStrikes(db: Sequelize, rows: StrikeRow[]) {
	const jobs = await loadStrikeJobs(db, rows);
	return rows.map(row => serializeStrike(row, jobs));
}
