import { formatDatetime } from "../list/iso8601";

/**
 * Ingests (Scale 3.0's ingest/models.py Ingest): a file moving through a strike, as the records
 * that embed one show it.
 */

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

/** The columns of IngestRow, over `ingest` without an alias. */
export const INGEST_BASE_COLUMNS = `id, file_name, strike_id, status, bytes_transferred,
	transfer_started, transfer_ended, media_type, file_size, data_type, ingest_started,
	ingest_ended, source_file_id, created, last_modified`;

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
