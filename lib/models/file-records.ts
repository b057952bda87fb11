import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/connection";
import {
	generationsSql,
	versionOf,
	type Embedded,
	type RecordSource,
	type RecordSpec
} from "../list/cached-list";
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

/** A job update's `input_files`: the files its refs (its data's inputs) name that exist, in order. */
export const INPUT_FILES: Embedded = {
	member: "input_files",
	source: FILE_SOURCE,
	spec: FILE_RECORD,
	async of(db, _keys, refs) {
		const ids = [...new Set(refs.flatMap(r => r ?? []))];
		const versions = new Map(
			ids.length === 0 ? [] : (await fileVersions(db, ids)).map(k => [k.__key, k])
		);
		return refs.map(r =>
			(r ?? []).flatMap(id => {
				const key = versions.get(id);
				return key === undefined ? [] : [key];
			})
		);
	}
};

/**
 * A product update's `source_files`: the source files linked to it as ancestors (directly or
 * through other products), by id.
 */
export const SOURCE_FILES: Embedded = {
	member: "source_files",
	source: FILE_SOURCE,
	spec: FILE_RECORD,
	async of(db, productIds) {
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
		const byProduct = new Map<number, { __key: number; __version: string }[]>();
		for (const [productId, key, version] of links ?? []) {
			const list = byProduct.get(productId) ?? [];
			list.push({
				__key: key,
				__version: versionOf({ __version: version, __generation: generation })
			});
			byProduct.set(productId, list);
		}
		return productIds.map(id => byProduct.get(id) ?? []);
	}
};
