import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import { JOB_COLUMNS, JOB_FROM, serializeJobBase, type JobListRow } from "./job";
import { maskStrikeSecrets } from "../documents/strike-s3";
import {
	FILE_ORDERABLE,
	loadFiles,
	notFoundDetail,
	serializeSourceFile,
	type FileRef,
	type ScaleFileRow
} from "./scale-file";

/**
 * Ingests (Scale 3.0's ingest/models.py Ingest, ingest/serializers.py): a file moving through a
 * strike, as the records that embed one show it, the ingest list and the ingest details.
 */

export const INGEST_STATUSES = [
	"TRANSFERRING",
	"TRANSFERRED",
	"DEFERRED",
	"INGESTING",
	"INGESTED",
	"ERRORED",
	"DUPLICATE"
];

export interface IngestRow {
	id: number;
	file_name: string;
	strike_id: number;
	status: string;
	/** bigint: pg answers it as a string */
	bytes_transferred: string | number;
	transfer_started: Date | null;
	transfer_ended: Date | null;
	media_type: string | null;
	file_size: string | number | null;
	data_type: string[];
	ingest_started: Date | null;
	ingest_ended: Date | null;
	source_file_id: number | null;
	created: Date;
	last_modified: Date;
}

const INGEST_BASE_FIELDS = [
	"id",
	"file_name",
	"strike_id",
	"status",
	"bytes_transferred",
	"transfer_started",
	"transfer_ended",
	"media_type",
	"file_size",
	"data_type",
	"ingest_started",
	"ingest_ended",
	"source_file_id",
	"created",
	"last_modified"
] as const;

/** The columns of IngestRow, over `ingest` without an alias. */
export const INGEST_BASE_COLUMNS = INGEST_BASE_FIELDS.join(", ");

function date(d: Date | null): string | null {
	return d ? formatDatetime(d) : null;
}

/** An ingest as a source file's details show it (Scale's IngestBaseSerializer). */
export function serializeIngestBase(row: IngestRow) {
	return {
		id: row.id,
		file_name: row.file_name,
		strike: { id: row.strike_id },
		status: row.status,
		bytes_transferred: Number(row.bytes_transferred),
		transfer_started: date(row.transfer_started),
		transfer_ended: date(row.transfer_ended),
		media_type: row.media_type,
		file_size: row.file_size === null ? null : Number(row.file_size),
		data_type: row.data_type,
		ingest_started: date(row.ingest_started),
		ingest_ended: date(row.ingest_ended),
		source_file: row.source_file_id === null ? null : { id: row.source_file_id },
		created: formatDatetime(row.created),
		last_modified: formatDatetime(row.last_modified)
	};
}

/** A `strike` row without its configuration. */
export interface StrikeRow {
	id: number;
	name: string;
	title: string | null;
	description: string | null;
	job_id: number | null;
	created: Date;
	last_modified: Date;
}

/** A strike as ingest lists show it (Scale's StrikeBaseSerializer). */
export function serializeStrikeBase(
	row: Pick<StrikeRow, "id" | "name" | "title" | "description" | "job_id">
) {
	return {
		id: row.id,
		name: row.name,
		title: row.title,
		description: row.description,
		job: row.job_id === null ? null : { id: row.job_id }
	};
}

/** A strike with its job's summary (Scale's StrikeSerializer), `jobs` from loadStrikeJobs. */
export function serializeStrike(row: StrikeRow, jobs: Map<number, JobListRow>) {
	const job = row.job_id === null ? undefined : jobs.get(row.job_id);
	return Object.assign(serializeStrikeBase(row), {
		job: job === undefined ? null : serializeJobBase(job),
		created: formatDatetime(row.created),
		last_modified: formatDatetime(row.last_modified)
	});
}

/** The strike jobs' rows by id, for the strikes' summaries. */
export async function loadStrikeJobs(
	db: Sequelize,
	strikes: StrikeRow[]
): Promise<Map<number, JobListRow>> {
	const ids = [...new Set(strikes.flatMap(s => (s.job_id === null ? [] : [s.job_id])))];
	if (ids.length === 0) return new Map();
	const rows = await selectPrepared<JobListRow>(
		db,
		`SELECT ${JOB_COLUMNS} FROM ${JOB_FROM} WHERE j.id = ANY($1::int[])`,
		[ids]
	);
	return new Map(rows.map(row => [row.id, row]));
}

/** Every column of a scale_file row (ScaleFileRow without its workspace's). */
const SCALE_FILE_FIELDS = [
	"id",
	"file_type",
	"workspace_id",
	"file_name",
	"file_path",
	"media_type",
	"file_size",
	"data_type",
	"is_deleted",
	"deleted",
	"uuid",
	"data_started",
	"data_ended",
	"geometry",
	"center_point",
	"meta_data",
	"countries",
	"is_parsed",
	"parsed",
	"job_type_id",
	"job_id",
	"job_exe_id",
	"is_operational",
	"has_been_published",
	"is_published",
	"published",
	"unpublished",
	"is_superseded",
	"superseded",
	"created",
	"last_modified"
] as const;

/** An ingest list row: the ingest, its strike (`s_`) and its source file (`sf_`) side by side. */
interface IngestListRow extends IngestRow {
	s_name: string;
	s_title: string | null;
	s_description: string | null;
	s_job_id: number | null;
	[sourceFileColumn: `sf_${string}`]: unknown;
}

// Prefixed, because the ingest, its strike and its source file share column names.
const INGEST_LIST_COLUMNS = [
	...INGEST_BASE_FIELDS.map(f => `i.${f}`),
	"s.name AS s_name",
	"s.title AS s_title",
	"s.description AS s_description",
	"s.job_id AS s_job_id",
	...SCALE_FILE_FIELDS.map(f => `f.${f} AS sf_${f}`),
	"w.name AS sf_workspace_name",
	"w.base_url AS sf_workspace_base_url"
].join(", ");

/** The source file columns of a list row, without their prefix (all null without a file). */
function sourceFileOf(row: IngestListRow): ScaleFileRow {
	return Object.fromEntries(
		Object.entries(row)
			.filter(([key]) => key.startsWith("sf_"))
			.map(([key, value]) => [key.slice(3), value])
	) as unknown as ScaleFileRow;
}

const ORDERABLE_INGEST_FIELDS = INGEST_BASE_FIELDS.filter(
	f => !["strike_id", "source_file_id", "data_type"].includes(f)
);

/**
 * GET /ingests/: as Scale's get_ingests, `started`/`ended` filter on last_modified, and the list
 * is ordered by it unless told otherwise; `order` reaches the strike and the source file with
 * `__`. Filters test the ingest's own columns, each with an index ending in (last_modified, id)
 * (migration 0006).
 */
export const INGEST_LIST: ListSource = {
	from: "ingest i",
	joins: `LEFT JOIN strike s ON s.id = i.strike_id
		LEFT JOIN scale_file f ON f.id = i.source_file_id
		LEFT JOIN workspace w ON w.id = f.workspace_id`,
	key: "i.id",
	columns: INGEST_LIST_COLUMNS,
	orderable: {
		...Object.fromEntries(ORDERABLE_INGEST_FIELDS.map(f => [f, `i.${f}`])),
		strike: "i.strike_id",
		strike__id: "i.strike_id",
		strike__name: "s.name",
		strike__title: "s.title",
		source_file: "i.source_file_id",
		...Object.fromEntries(
			Object.entries(FILE_ORDERABLE).map(([key, column]) => [`source_file__${key}`, column])
		),
		source_file__id: "i.source_file_id"
	},
	defaultOrder: ["last_modified"],
	timeColumn: "i.last_modified",
	filters: {
		status: { column: "i.status", type: "enum", values: INGEST_STATUSES },
		strike_id: { column: "i.strike_id", type: "integer" },
		file_name: { column: "i.file_name", type: "string" }
	}
};

/** Ingest records as lists show them (Scale's IngestSerializer). */
export function serializeIngests(rows: IngestListRow[], apiRoot?: string) {
	return rows.map(row => {
		const source = sourceFileOf(row);
		return Object.assign(serializeIngestBase(row), {
			strike: serializeStrikeBase({
				id: row.strike_id,
				name: row.s_name,
				title: row.s_title,
				description: row.s_description,
				job_id: row.s_job_id
			}),
			source_file: source.id === null ? null : serializeSourceFile(source, apiRoot)
		});
	});
}

/** A whole `strike` row. */
interface StrikeDetailsRow extends StrikeRow {
	configuration: Record<string, unknown>;
}

/** The ingest's own columns the details add. */
interface IngestDetailsRow extends IngestRow {
	transfer_path: string | null;
	file_path: string | null;
	ingest_path: string | null;
	error: string | null;
	scan_id: number | null;
}

/**
 * GET /ingests/{id}/ or /ingests/{file_name}/: an ingest with its paths, its strike expanded
 * (job summary and configuration, Scale's StrikeDetailsSerializer; null for a scan's ingest,
 * which names its `scan_id`) and its source file. A file name may have been ingested more than
 * once; as Scale's view, the name gives the ingest created last. `shares_name_with` is the source
 * file ingested last before this one under the same name (a different file: the same one is a
 * DUPLICATE), found when asked, so the ingest's writes carry nothing for it.
 */
export async function getIngestDetails(db: Sequelize, ref: FileRef | null, apiRoot?: string) {
	const [ingest] =
		ref === null
			? []
			: await selectPrepared<IngestDetailsRow>(
					db,
					`SELECT ${INGEST_BASE_COLUMNS}, transfer_path, file_path, ingest_path, error, scan_id
					 FROM ingest
					 WHERE ${"id" in ref ? "id = $1::int" : "file_name = $1::text"}
					 ORDER BY created DESC, id DESC LIMIT 1`,
					["id" in ref ? ref.id : ref.fileName]
				);
	if (!ingest) throw new NotFoundError(notFoundDetail("ingest", ref));
	const sourceId = ingest.source_file_id;
	const [[strike], [earlier]] = await Promise.all([
		selectPrepared<StrikeDetailsRow>(db, `SELECT * FROM strike WHERE id = $1`, [
			ingest.strike_id
		]),
		sourceId === null
			? []
			: selectPrepared<{ id: number }>(
					db,
					// by the name's index, then sorted (OFFSET 0): a walk down the primary key
					// for the latest id could pass millions of rows of other names
					`SELECT id FROM (
						SELECT e.id FROM scale_file f JOIN scale_file e ON e.file_type = 'SOURCE'
							AND e.file_name = f.file_name AND e.id < f.id
						WHERE f.id = $1 OFFSET 0
					 ) x ORDER BY id DESC LIMIT 1`,
					[sourceId]
				)
	]);
	const files = await loadFiles(db, [
		...(sourceId === null ? [] : [sourceId]),
		...(earlier ? [earlier.id] : [])
	]);
	const fileOf = (id: number | null | undefined) => {
		const row = id === null || id === undefined ? undefined : files.get(id);
		return row === undefined ? null : serializeSourceFile(row, apiRoot);
	};
	return Object.assign(serializeIngestBase(ingest), {
		strike: strike
			? Object.assign(serializeStrike(strike, await loadStrikeJobs(db, [strike])), {
					// an s3 monitor's secret, as GET /strikes/{id}/ masks it
					configuration: maskStrikeSecrets(strike.configuration)
				})
			: null,
		scan_id: ingest.scan_id,
		source_file: fileOf(sourceId),
		shares_name_with: fileOf(earlier?.id),
		transfer_path: ingest.transfer_path,
		file_path: ingest.file_path,
		ingest_path: ingest.ingest_path,
		// why an ERRORED ingest failed (this service's addition)
		error: ingest.error
	});
}
