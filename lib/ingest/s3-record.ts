import path from "path";
import type { Sequelize } from "sequelize";
import { select, transaction, type Sql } from "../db/run";
import { s3PlaceOf } from "../documents/s3-broker";
import {
	isS3StrikeConfiguration,
	s3StrikeWorkspaces,
	type S3StrikeConfiguration
} from "../documents/strike-s3";
import { matchFileName } from "../documents/strike-configuration";
import { mediaTypeOf } from "../documents/media-types";
import { copyObject, deleteObject } from "../storage/s3";
import type { CreatedObject, SqsPlace } from "../storage/sqs";
import type { MonitorCall, MonitorSetup } from "./protocol";
import { guard } from "./guard";
import { ConflictError } from "../errors";

/**
 * The `ingest` service's side of an S3 strike (configuration 2.0): the monitor (on the agent that
 * runs the strike's job) reads the bucket's notifications from SQS and sends the objects created;
 * each is recorded once (`ingest.checksum`, migration 0027: a notification delivered twice, or
 * redelivered after a monitor died before deleting it, finds the first ingest), moved where its
 * rule says (a copy within the store, then the original deleted, after the commit), and becomes a
 * source file unless one of the same name and content exists (DUPLICATE). The monitor deletes the
 * message only once this has answered.
 */

interface WorkspaceFacts {
	id: number;
	name: string;
	broker: Record<string, any>;
}

/** What an S3 strike's monitor needs: its queue, reached as the strike's workspace is. */
export async function s3MonitorSetup(
	q: Sql["query"],
	config: S3StrikeConfiguration,
	withCredentials: boolean
): Promise<MonitorSetup> {
	const [ws] = (await q(`SELECT json_config->'broker' AS broker FROM workspace WHERE name = $1`, [
		config.workspace
	])) as { broker: Record<string, any> }[];
	const monitor = config.monitor;
	const credentials = monitor.credentials ?? ws?.broker?.credentials;
	const sqs: SqsPlace = { queueName: monitor.sqs_name };
	const region = monitor.region_name ?? ws?.broker?.region_name;
	if (region) sqs.region = region;
	if (monitor.endpoint_url) sqs.endpoint = monitor.endpoint_url;
	if (withCredentials && credentials)
		sqs.credentials = {
			accessKeyId: credentials.access_key_id,
			secretAccessKey: credentials.secret_access_key
		};
	return { directory: "", transferSuffix: "", open: [], sqs };
}

/** Who ingests: a strike or a scan. */
export type IngestOrigin =
	{ strikeId: number; scanId?: undefined } | { scanId: number; strikeId?: undefined };

export interface Planned {
	object: CreatedObject;
	transferPath: string;
	checksum: string;
	fileName: string;
	status: "INGESTED" | "DUPLICATE" | "DEFERRED" | "ERRORED";
	error: string | null;
	dataTypes: string[];
	/** where it is stored: its workspace and key */
	workspace: WorkspaceFacts | null;
	filePath: string | null;
	/** moved from the strike's workspace: copied there first, the original deleted after */
	moved: boolean;
}

export interface S3Recorded {
	/** ingests written now (the others were recorded by an earlier delivery) */
	recorded: number;
	/** INGEST trigger events written */
	events: number;
}

/**
 * Records the objects a notification names (see the module's comment), for the strike's running
 * execution only (ConflictError otherwise, as every monitor call).
 */
export async function recordS3Objects(
	db: Sequelize,
	call: MonitorCall,
	agentId: string,
	objects: CreatedObject[]
): Promise<S3Recorded> {
	const strikeId = call.strikeId;
	const config = (await transaction(db, t => guard(t.query, call, agentId))) as unknown;
	if (!isS3StrikeConfiguration(config))
		throw new ConflictError(`strike ${strikeId} does not read an S3 bucket's notifications`);
	const workspaces = await select<WorkspaceFacts>(
		db,
		`SELECT id, name, json_config->'broker' AS broker FROM workspace WHERE name = ANY($1::text[])`,
		[s3StrikeWorkspaces(config)]
	);
	const byName = new Map(workspaces.map(w => [w.name, w]));
	const home = byName.get(config.workspace);
	// one entry per object and content, however often the batch names it
	const unique = new Map<string, CreatedObject>();
	for (const object of objects)
		unique.set(`${object.bucket}/${object.key}\0${object.etag ?? ""}`, object);
	const candidates = [...unique.values()];
	const [known, sources] = await Promise.all([
		select<{ transfer_path: string; checksum: string }>(
			db,
			`SELECT transfer_path, checksum FROM ingest
			 WHERE strike_id = $1 AND transfer_path = ANY($2::text[]) AND checksum IS NOT NULL`,
			[strikeId, candidates.map(o => `s3://${o.bucket}/${o.key}`)]
		),
		select<{ file_name: string; file_size: string; checksum: string | null }>(
			db,
			`SELECT file_name, file_size, checksum FROM scale_file
			 WHERE file_type = 'SOURCE' AND file_name = ANY($1::text[])`,
			[candidates.map(o => path.posix.basename(o.key))]
		)
	]);
	const seen = new Set(known.map(k => `${k.transfer_path}\0${k.checksum}`));
	const plans: Planned[] = [];
	for (const object of candidates) {
		const transferPath = `s3://${object.bucket}/${object.key}`;
		const checksum = object.etag ?? "";
		if (seen.has(`${transferPath}\0${checksum}`)) continue;
		plans.push(plan(config, byName, home, object, transferPath, checksum, sources));
	}
	// copies before the record: a copy made twice (a redelivery) is the same object
	for (const p of plans)
		if (p.moved && p.status === "INGESTED" && home)
			await copyObject(
				s3PlaceOf(p.workspace!.broker, true),
				p.object.bucket,
				p.object.key,
				p.filePath!
			).catch(error => {
				p.status = "ERRORED";
				p.error = `cannot copy it to ${p.workspace!.name}: ${(error as Error).message}`;
			});
	const written = plans.length === 0 ? null : await writePlans(db, { strikeId }, plans);
	// the originals of moved objects go once their ingests are recorded
	for (const p of plans)
		if (p.moved && p.status === "INGESTED" && home && written?.ingested.has(p.transferPath))
			await deleteObject(s3PlaceOf(home.broker, true), p.object.key).catch(() => undefined);
	return { recorded: written?.recorded ?? 0, events: written?.ingested.size ?? 0 };
}

export function plan(
	config: Pick<S3StrikeConfiguration, "workspace" | "files_to_ingest">,
	byName: Map<string, WorkspaceFacts>,
	home: WorkspaceFacts | undefined,
	object: CreatedObject,
	transferPath: string,
	checksum: string,
	sources: { file_name: string; file_size: string; checksum: string | null }[]
): Planned {
	const fileName = path.posix.basename(object.key);
	const p: Planned = {
		object,
		transferPath,
		checksum,
		fileName,
		status: "DEFERRED",
		error: null,
		dataTypes: [],
		workspace: null,
		filePath: null,
		moved: false
	};
	if (!home || (home.broker?.type === "s3" && home.broker.bucket_name !== object.bucket)) {
		p.status = "ERRORED";
		p.error = `the bucket "${object.bucket}" is not the workspace "${config.workspace}"'s`;
		return p;
	}
	const rule = matchFileName(config, fileName);
	if (!rule) return p;
	p.dataTypes = rule.data_types;
	const target = byName.get(rule.new_workspace ?? config.workspace);
	if (!target) {
		p.status = "ERRORED";
		p.error = `the workspace "${rule.new_workspace}" does not exist`;
		return p;
	}
	const duplicate = sources.some(
		s =>
			s.file_name === fileName &&
			Number(s.file_size) === object.size &&
			(s.checksum === null || object.etag === null || s.checksum === object.etag)
	);
	if (duplicate) {
		p.status = "DUPLICATE";
		return p;
	}
	p.status = "INGESTED";
	p.workspace = target;
	p.filePath =
		rule.new_file_path !== undefined
			? path.posix.join(rule.new_file_path, fileName)
			: object.key;
	p.moved = target.id !== home.id || p.filePath !== object.key;
	return p;
}

/**
 * One transaction: the ingests (those another delivery wrote meanwhile are left alone), the
 * source files of the ingested ones, their INGEST events. Answers how many ingests were written
 * and the transfer paths of those ingested.
 */
export async function writePlans(
	db: Sequelize,
	origin: IngestOrigin,
	plans: Planned[]
): Promise<{ recorded: number; ingested: Set<string> }> {
	const column = origin.strikeId !== undefined ? "strike_id" : "scan_id";
	const originId = origin.strikeId ?? origin.scanId;
	const rows = plans.map(p => ({
		name: p.fileName,
		transfer_path: p.transferPath,
		checksum: p.checksum,
		etag: p.object.etag,
		size: p.object.size,
		occurred: p.object.eventTime,
		media_type: mediaTypeOf(p.fileName),
		data_type: p.dataTypes,
		status: p.status,
		error: p.error,
		workspace_id: p.workspace?.id ?? null,
		file_path: p.filePath
	}));
	return transaction(db, async ({ query: q }) => {
		const COLUMNS = `name text, transfer_path text, checksum text, etag text, size bigint,
			occurred timestamptz, media_type text, data_type text[], status text, error text,
			workspace_id int, file_path text`;
		// the ingests first: one that another delivery wrote is not written, nor its file
		const ingests = (await q(
			`INSERT INTO ingest (file_name, ${column}, status, transfer_path, bytes_transferred,
				transfer_started, transfer_ended, media_type, file_size, data_type, file_path,
				workspace_id, ingest_started, ingest_ended, error, checksum)
			 SELECT r.name, $2, CASE WHEN r.status = 'INGESTED' THEN 'INGESTING' ELSE r.status END,
				r.transfer_path, r.size, r.occurred, r.occurred, r.media_type, r.size, r.data_type,
				r.file_path, r.workspace_id, now(),
				CASE WHEN r.status = 'INGESTED' THEN NULL ELSE now() END, r.error, r.checksum
			 FROM json_to_recordset($1::json) AS r(${COLUMNS})
			 ON CONFLICT (${column}, transfer_path, checksum) WHERE checksum IS NOT NULL DO NOTHING
			 RETURNING id, transfer_path, status`,
			[JSON.stringify(rows), originId]
		)) as { id: number; transfer_path: string; status: string }[];
		const ingesting = ingests.filter(i => i.status === "INGESTING");
		const ingested = new Set<string>();
		if (ingesting.length > 0) {
			const byPath = new Map(rows.map(r => [r.transfer_path, r]));
			const toStore = ingesting.map(i => ({
				...byPath.get(i.transfer_path)!,
				ingest_id: i.id
			}));
			const stored = (await q(
				`WITH r AS (
					SELECT * FROM json_to_recordset($1::json) AS r(${COLUMNS}, ingest_id int)
				 ), f AS (
					INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
						file_size, data_type, uuid, checksum)
					SELECT 'SOURCE', r.workspace_id, r.name, r.file_path, r.media_type, r.size,
						r.data_type, md5(r.name || '/' || COALESCE(r.etag, r.size::text)), r.etag
					FROM r
					ON CONFLICT (file_name, file_size, (COALESCE(checksum, '')))
						WHERE file_type = 'SOURCE' DO NOTHING
					RETURNING id, file_name, file_path
				 ), i AS (
					UPDATE ingest SET
						status = CASE WHEN f.id IS NULL THEN 'DUPLICATE' ELSE 'INGESTED' END,
						source_file_id = f.id, ingest_ended = now(), last_modified = now()
					FROM r LEFT JOIN f ON f.file_name = r.name AND f.file_path = r.file_path
					WHERE ingest.id = r.ingest_id
					RETURNING ingest.id, ingest.file_name, ingest.status, ingest.source_file_id,
						ingest.transfer_path, ingest.ingest_ended
				 ), e AS (
					INSERT INTO trigger_event (type, description, occurred)
					SELECT 'INGEST', jsonb_build_object('version', '1.0', 'file_id', i.source_file_id,
						'file_name', i.file_name, 'ingest_id', i.id, '${column}', $2::int),
						i.ingest_ended
					FROM i WHERE i.status = 'INGESTED' ORDER BY i.id RETURNING id
				 )
				 SELECT transfer_path FROM i WHERE status = 'INGESTED'`,
				[JSON.stringify(toStore), originId]
			)) as { transfer_path: string }[];
			for (const row of stored) ingested.add(row.transfer_path);
		}
		return { recorded: ingests.length, ingested };
	});
}
