import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/connection";
import {
	joined,
	recordsOf,
	versionOf,
	versionSelect,
	type RecordSource,
	type RecordSpec
} from "../list/cached-list";
import type { CachedRecord } from "../list/record-cache";
import { FILE_COLUMNS, serializeScaleFile, type ScaleFileRow } from "./scale-file";

/**
 * File records embedded in other records of the lists (a job update's `input_files`, a product
 * update's `source_files`), cached by version like the lists' own (lib/list/cached-list.ts).
 */

/** A file record is current while the file's row and the workspaces are unchanged. */
export const FILE_VERSION = "f.xmin::text";

const FILE_SOURCE: RecordSource = {
	from: "scale_file f",
	joins: "JOIN workspace w ON w.id = f.workspace_id",
	key: "f.id",
	columns: FILE_COLUMNS
};

const FILE_RECORD: RecordSpec<ScaleFileRow> = {
	name: "file",
	version: FILE_VERSION,
	versionJoins: "",
	generations: ["workspace"],
	byApiRoot: true,
	record: (row, apiRoot) => serializeScaleFile(row, apiRoot)
};

const INPUT_FILES = Buffer.from('"input_files":[');
const SOURCE_FILES = Buffer.from('"source_files":[');
const END = Buffer.from("]");

/** `"input_files":[...]` of each job update record: the files its refs name that exist, in order. */
export async function attachInputFiles(
	db: Sequelize,
	records: CachedRecord[],
	apiRoot: string | undefined
): Promise<Buffer[][]> {
	const ids = [...new Set(records.flatMap(r => r.refs ?? []))];
	const files =
		ids.length === 0
			? new Map<number, CachedRecord>()
			: await recordsOf(
					db,
					FILE_SOURCE,
					FILE_RECORD,
					(
						await selectPrepared<{
							__key: number;
							__version: string;
							__generation: string;
						}>(
							db,
							`SELECT f.id AS __key, ${versionSelect(FILE_RECORD)}
							 FROM scale_file f WHERE f.id = ANY($1::int[])`,
							[ids]
						)
					).map(row => ({ __key: row.__key, __version: versionOf(row) })),
					apiRoot
				);
	return records.map(r => [
		INPUT_FILES,
		...joined((r.refs ?? []).flatMap(id => files.get(id)?.json ?? [])),
		END
	]);
}

/**
 * `"source_files":[...]` of each product update record: the source files linked to it as
 * ancestors (directly or through other products), by id.
 */
export async function attachSourceFiles(
	db: Sequelize,
	productIds: number[],
	apiRoot: string | undefined
): Promise<Buffer[][]> {
	const links = await selectPrepared<{
		product_id: number;
		__key: number;
		__version: string;
		__generation: string;
	}>(
		db,
		`SELECT DISTINCT ON (l.descendant_id, f.id) l.descendant_id AS product_id,
			f.id AS __key, ${versionSelect(FILE_RECORD)}
		 FROM file_ancestry_link l JOIN scale_file f ON f.id = l.ancestor_id
		 WHERE l.descendant_id = ANY($1::int[]) AND f.file_type = 'SOURCE'
		 ORDER BY l.descendant_id, f.id`,
		[productIds]
	);
	const unique = new Map(links.map(l => [l.__key, { __key: l.__key, __version: versionOf(l) }]));
	const files = await recordsOf(db, FILE_SOURCE, FILE_RECORD, [...unique.values()], apiRoot);
	const byProduct = new Map<number, Buffer[]>();
	for (const link of links) {
		const json = files.get(link.__key)?.json;
		if (json === undefined) continue;
		const list = byProduct.get(link.product_id) ?? [];
		list.push(json);
		byProduct.set(link.product_id, list);
	}
	return productIds.map(id => [SOURCE_FILES, ...joined(byProduct.get(id) ?? []), END]);
}
