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

/**
 * A file record is current while the file's row (its `last_modified`, which every UPDATE changes:
 * migration 0016) and the workspaces are unchanged.
 */
export const FILE_VERSION = "f.last_modified::text";

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

/**
 * The files a record's refs name that exist, in order, as the member `member`: the ids come with
 * the record (kept with it), their versions are read for the page in one statement.
 */
function filesByRefs(member: string): Embedded {
	return {
		member,
		source: FILE_SOURCE,
		spec: FILE_RECORD,
		async of(db, _keys, refs) {
			const ids = new Set<number>();
			for (const r of refs) if (r) for (const id of r) ids.add(id);
			const versions = new Map<number, { __key: number; __version: string }>();
			if (ids.size > 0)
				for (const k of await fileVersions(db, [...ids])) versions.set(k.__key, k);
			return refs.map(r => {
				const found: { __key: number; __version: string }[] = [];
				for (const id of r ?? []) {
					const key = versions.get(id);
					if (key !== undefined) found.push(key);
				}
				return found;
			});
		}
	};
}

/** A job update's `input_files`: the files its data's inputs name (its refs), in order. */
export const INPUT_FILES = filesByRefs("input_files");

/**
 * A product update's `source_files`: the source files linked to it as ancestors (directly or
 * through other products), by id (its refs, see PRODUCT_UPDATES_LIST).
 */
export const SOURCE_FILES = filesByRefs("source_files");
