import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { RecordSpec } from "../list/record-spec";
import type { ListSource } from "../list/types";
import { FILE_VERSION } from "./file-records";
import { INGEST_BASE_COLUMNS, serializeIngestBase, type IngestRow } from "./ingest";
import { loadDescendantProducts, RELATED_LIMIT, serializeProduct } from "./product-file";
import {
	FILE_COLUMNS,
	FILE_ORDERABLE,
	notFoundDetail,
	serializeSourceFile,
	type FileRef,
	type ScaleFileRow
} from "./scale-file";

/**
 * Source files as the REST interface shows them (Scale 3.0's source/models.py SourceFileManager
 * get_sources and get_details, source/serializers.py): the list, its updates view and the
 * details with the file's ingests and the products made from it.
 */

/**
 * GET /sources/ and /sources/updates/: as Scale, both filter on last_modified and order by it
 * unless told otherwise.
 */
export const SOURCE_LIST: ListSource = {
	// Sources only: an inlined sub-select, so the partial indexes on sources apply (`xmin`: a
	// record's version).
	from: "(SELECT *, xmin FROM scale_file WHERE file_type = 'SOURCE') f",
	joins: "LEFT JOIN workspace w ON w.id = f.workspace_id",
	key: "f.id",
	columns: FILE_COLUMNS,
	orderable: { ...FILE_ORDERABLE, is_parsed: "f.is_parsed", parsed: "f.parsed" },
	defaultOrder: ["last_modified"],
	timeColumn: "f.last_modified",
	filters: {
		is_parsed: { column: "f.is_parsed", type: "boolean" },
		file_name: { column: "f.file_name", type: "string" }
	}
};

/** GET /sources/updates/: the list's files, filters and order, as in Scale (get_sources). */
export const SOURCE_UPDATES_LIST: ListSource = SOURCE_LIST;

function date(d: Date | null): string | null {
	return d ? formatDatetime(d) : null;
}

/** What last happened to a source file, as its update record says (Scale's SourceFileUpdateField). */
export function sourceUpdate(
	row: Pick<ScaleFileRow, "is_deleted" | "deleted" | "is_parsed" | "parsed" | "created">
) {
	if (row.is_deleted) return { action: "DELETED", when: date(row.deleted) };
	if (row.is_parsed) return { action: "PARSED", when: date(row.parsed) };
	return { action: "CREATED", when: date(row.created) };
}

/** Source records, current while the file's row and the workspaces are unchanged. */
export const SOURCE_RECORD: RecordSpec<ScaleFileRow> = {
	name: "source",
	version: FILE_VERSION,
	versionJoins: "",
	generations: ["workspace"],
	byApiRoot: true,
	record: (row, apiRoot) => serializeSourceFile(row, apiRoot)
};

/** Source update records: each with `update`. */
export const SOURCE_UPDATE_RECORD: RecordSpec<ScaleFileRow> = {
	...SOURCE_RECORD,
	name: "source-update",
	record: (row, apiRoot) =>
		Object.assign(serializeSourceFile(row, apiRoot), { update: sourceUpdate(row) })
};

/**
 * GET /sources/{id}/ (or /sources/{file_name}/, source file names being unique): the source
 * file (by a name several files had, the latest) with `ingests`, the ingests that brought it in, and `products`, the products made from
 * it, each oldest first and RELATED_LIMIT at most.
 */
export async function getSourceDetails(db: Sequelize, ref: FileRef | null, apiRoot?: string) {
	const [source] =
		ref === null
			? []
			: await selectPrepared<ScaleFileRow>(
					db,
					`SELECT ${FILE_COLUMNS} FROM scale_file f JOIN workspace w ON w.id = f.workspace_id
					 WHERE ${"id" in ref ? "f.id = $1::int" : "f.file_name = $1::text"}
						AND f.file_type = 'SOURCE' ORDER BY f.id DESC LIMIT 1`,
					["id" in ref ? ref.id : ref.fileName]
				);
	if (!source) throw new NotFoundError(notFoundDetail("source file", ref));
	const [ingests, products] = await Promise.all([
		selectPrepared<IngestRow>(
			db,
			`SELECT ${INGEST_BASE_COLUMNS} FROM ingest WHERE source_file_id = $1
			 ORDER BY created, id LIMIT ${RELATED_LIMIT}`,
			[source.id]
		),
		loadDescendantProducts(db, source.id)
	]);
	return Object.assign(serializeSourceFile(source, apiRoot), {
		ingests: ingests.map(serializeIngestBase),
		products: products.map(p => serializeProduct(p, apiRoot))
	});
}
