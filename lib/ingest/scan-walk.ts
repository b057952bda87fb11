import { promises as fs } from "fs";
import path from "path";
import type { Sequelize } from "sequelize";
import { select, write } from "../db/run";
import { s3PlaceOf } from "../documents/s3-broker";
import { matchFileName } from "../documents/strike-configuration";
import type { ScanConfiguration } from "../documents/scan-configuration";
import { copyObject, deleteObject, listObjects } from "../storage/s3";
import type { CreatedObject } from "../storage/sqs";
import { plan, writePlans, type Planned } from "./s3-record";

/**
 * A scan's walk, in a control plane (docs/decisions.md, "A scan walks in the control plane"): the
 * workspace's files in key order (S3's listing; a directory's depth first, names sorted), a page
 * at a time; each page's matched files counted (dry run) or ingested as an S3 strike's objects
 * are (lib/ingest/s3-record.ts), then the progress and the page's last key written under this
 * walker's lease. A walker that dies leaves the lease to run out: another control plane claims
 * the scan and resumes after the last page recorded; the page it walks again makes no second
 * ingest (one per scan, file and checksum).
 */

interface Facts {
	id: number;
	name: string;
	broker: Record<string, any>;
}

interface Listed {
	key: string;
	size: number;
	/** S3's ETag; for a host file, null */
	etag: string | null;
	/** what tells two contents of a path apart for the ingest's record: ETag, or size and mtime */
	checksum: string;
}

/** Scans whose walk is RUNNING and whose lease ran out (or was never taken), now `owner`'s. */
export async function claimScans(db: Sequelize, owner: string, leaseMs: number): Promise<number[]> {
	const rows = await write<{ id: number }>(
		db,
		`UPDATE scan SET owner = $1, lease_until = now() + $2 * interval '1 millisecond'
		 WHERE status = 'RUNNING' AND (lease_until IS NULL OR lease_until < now())
		 RETURNING id`,
		[owner, leaseMs]
	);
	return rows.map(r => r.id);
}

export interface WalkOptions {
	owner: string;
	leaseMs: number;
	pageSize: number;
	/** the walk stops after the page it is on (the process stops) */
	stopping(): boolean;
	/** INGEST trigger events were written */
	onEvents(count: number): void;
}

/** Walks a claimed scan to its end, or until it stops or loses its lease. */
export async function walkScan(db: Sequelize, scanId: number, options: WalkOptions): Promise<void> {
	const [scan] = await select<{
		configuration: ScanConfiguration;
		dry_run: boolean;
		resume_after: string | null;
	}>(db, `SELECT configuration, dry_run, resume_after FROM scan WHERE id = $1 AND owner = $2`, [
		scanId,
		options.owner
	]);
	if (!scan) return;
	const config = scan.configuration;
	try {
		const workspaces = await select<Facts>(
			db,
			`SELECT id, name, json_config->'broker' AS broker FROM workspace WHERE name = ANY($1::text[])`,
			[[config.workspace, ...config.files_to_ingest.flatMap(r => r.new_workspace ?? [])]]
		);
		const byName = new Map(workspaces.map(w => [w.name, w]));
		const home = byName.get(config.workspace);
		if (!home) throw new Error(`the workspace "${config.workspace}" does not exist`);
		const pages =
			home.broker.type === "s3"
				? s3Pages(home.broker, config.recursive, scan.resume_after, options.pageSize)
				: dirPages(
						home.broker.host_path,
						config.recursive,
						scan.resume_after,
						options.pageSize
					);
		for await (const page of pages) {
			if (options.stopping()) return;
			const matched = page.filter(f => matchFileName(config, path.posix.basename(f.key)));
			const ingested =
				scan.dry_run || matched.length === 0
					? 0
					: await ingestPage(db, scanId, config, byName, home, matched, options);
			const [kept] = await write<{ id: number }>(
				db,
				`UPDATE scan SET files_scanned = files_scanned + $3, file_count = file_count + $4,
					files_ingested = files_ingested + $5, resume_after = $6, last_modified = now(),
					lease_until = now() + $7 * interval '1 millisecond'
				 WHERE id = $1 AND owner = $2 AND status = 'RUNNING' RETURNING id`,
				[
					scanId,
					options.owner,
					page.length,
					matched.length,
					ingested,
					page[page.length - 1].key,
					options.leaseMs
				]
			);
			if (!kept) return;
		}
		await write(
			db,
			`UPDATE scan SET status = 'COMPLETED', ended = now(), owner = NULL, lease_until = NULL,
				last_modified = now()
			 WHERE id = $1 AND owner = $2 AND status = 'RUNNING' RETURNING id`,
			[scanId, options.owner]
		);
	} catch (error) {
		await write(
			db,
			`UPDATE scan SET status = 'FAILED', ended = now(), error = $3, owner = NULL,
				lease_until = NULL, last_modified = now()
			 WHERE id = $1 AND owner = $2 RETURNING id`,
			[scanId, options.owner, (error as Error).message]
		);
	}
}

/** A page's matched files ingested; answers how many became source files. */
async function ingestPage(
	db: Sequelize,
	scanId: number,
	config: ScanConfiguration,
	byName: Map<string, Facts>,
	home: Facts,
	files: Listed[],
	options: WalkOptions
): Promise<number> {
	const sources = await select<{ file_name: string; file_size: string; checksum: string | null }>(
		db,
		`SELECT file_name, file_size, checksum FROM scale_file
		 WHERE file_type = 'SOURCE' AND file_name = ANY($1::text[])`,
		[files.map(f => path.posix.basename(f.key))]
	);
	const where =
		home.broker.type === "s3"
			? (key: string) => `s3://${home.broker.bucket_name}/${key}`
			: (key: string) => path.posix.join(home.broker.host_path, key);
	const plans: Planned[] = files.map(f => {
		const object: CreatedObject = {
			bucket: home.broker.bucket_name ?? "",
			key: f.key,
			size: f.size,
			etag: f.etag,
			eventTime: null
		};
		return plan(config, byName, home, object, where(f.key), f.checksum, sources);
	});
	for (const p of plans)
		if (p.moved && p.status === "INGESTED")
			await copyObject(
				s3PlaceOf(p.workspace!.broker, true),
				p.object.bucket,
				p.object.key,
				p.filePath!
			).catch(error => {
				p.status = "ERRORED";
				p.error = `cannot copy it to ${p.workspace!.name}: ${(error as Error).message}`;
			});
	const written = await writePlans(db, { scanId }, plans);
	for (const p of plans)
		if (p.moved && p.status === "INGESTED" && written.ingested.has(p.transferPath))
			await deleteObject(s3PlaceOf(home.broker, true), p.object.key).catch(() => undefined);
	if (written.ingested.size > 0) options.onEvents(written.ingested.size);
	return written.ingested.size;
}

async function* s3Pages(
	broker: Record<string, any>,
	recursive: boolean,
	after: string | null,
	pageSize: number
): AsyncGenerator<Listed[]> {
	for await (const listed of listObjects(s3PlaceOf(broker, true), "", after ?? undefined)) {
		const files = listed
			.filter(o => recursive || !o.key.includes("/"))
			.filter(o => !o.key.endsWith("/"))
			.map(o => ({ key: o.key, size: o.size, etag: o.etag, checksum: o.etag ?? "" }));
		for (let i = 0; i < files.length; i += pageSize) yield files.slice(i, i + pageSize);
	}
}

/** Path order of a depth-first walk with sorted names: component by component. */
export function comparePaths(a: string, b: string): number {
	const x = a.split("/");
	const y = b.split("/");
	for (let i = 0; i < Math.min(x.length, y.length); i++)
		if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
	return x.length - y.length;
}

async function* dirPages(
	root: string,
	recursive: boolean,
	after: string | null,
	pageSize: number
): AsyncGenerator<Listed[]> {
	let page: Listed[] = [];
	async function* walk(dir: string): AsyncGenerator<Listed> {
		const entries = (await fs.readdir(path.join(root, dir), { withFileTypes: true })).sort(
			(a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
		);
		for (const entry of entries) {
			if (entry.name.startsWith(".")) continue;
			const key = dir ? `${dir}/${entry.name}` : entry.name;
			if (entry.isDirectory()) {
				// a folder wholly before where the walk resumes is not entered
				if (
					!recursive ||
					(after && comparePaths(key, after) < 0 && !after.startsWith(`${key}/`))
				)
					continue;
				yield* walk(key);
			} else if (entry.isFile() && !(after && comparePaths(key, after) <= 0)) {
				const stat = await fs.stat(path.join(root, key));
				yield {
					key,
					size: stat.size,
					etag: null,
					checksum: `${stat.size}:${Math.trunc(stat.mtimeMs)}`
				};
			}
		}
	}
	for await (const file of walk("")) {
		page.push(file);
		if (page.length >= pageSize) {
			yield page;
			page = [];
		}
	}
	if (page.length > 0) yield page;
}
