import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/connection";
import {
	generationsSql,
	joined,
	recordsOf,
	versionOf,
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

/** The keys and versions of the files by id, read in one row (see pageItemsSql). */
async function fileVersions(
	db: Sequelize,
	ids: number[]
): Promise<{ __key: number; __version: string }[]> {
	const [{ files, generation }] = await selectPrepared<{
		files: [number, string][] | null;
		generation: string;
	}>(
		db,
		`SELECT json_agg(json_build_array(f.id, ${FILE_RECORD.version})) AS files,
			${generationsSql(FILE_RECORD)} AS generation
		 FROM scale_file f WHERE f.id = ANY($1::int[])`,
		[ids]
	);
	return (files ?? []).map(([key, version]) => ({
		__key: key,
		__version: versionOf({ __version: version, __generation: generation })
	}));
}

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
			: await recordsOf(db, FILE_SOURCE, FILE_RECORD, await fileVersions(db, ids), apiRoot);
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
	// One row: the links as a JSON array of [product, file, version] (see pageItemsSql).
	const [{ links, generation }] = await selectPrepared<{
		links: [number, number, string][] | null;
		generation: string;
	}>(
		db,
		`SELECT json_agg(json_build_array(product_id, file_id, version)
				ORDER BY product_id, file_id) AS links,
			${generationsSql(FILE_RECORD)} AS generation
		 FROM (SELECT DISTINCT l.descendant_id AS product_id, f.id AS file_id,
				${FILE_RECORD.version} AS version
			FROM file_ancestry_link l JOIN scale_file f ON f.id = l.ancestor_id
			WHERE l.descendant_id = ANY($1::int[]) AND f.file_type = 'SOURCE') linked`,
		[productIds]
	);
	const unique = new Map<number, { __key: number; __version: string }>();
	for (const [, key, version] of links ?? [])
		unique.set(key, {
			__key: key,
			__version: versionOf({ __version: version, __generation: generation })
		});
	const files = await recordsOf(db, FILE_SOURCE, FILE_RECORD, [...unique.values()], apiRoot);
	const byProduct = new Map<number, Buffer[]>();
	for (const [productId, key] of links ?? []) {
		const json = files.get(key)?.json;
		if (json === undefined) continue;
		const list = byProduct.get(productId) ?? [];
		list.push(json);
		byProduct.set(productId, list);
	}
	return productIds.map(id => [SOURCE_FILES, ...joined(byProduct.get(id) ?? []), END]);
}
