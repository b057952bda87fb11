import type { Embedded } from "../list/embedded";
import type { RecordSource, RecordSpec } from "../list/record-spec";
import { FILE_COLUMNS, serializeScaleFile, type ScaleFileRow } from "./scale-file";

/**
 * File records embedded in other records of the lists (a job update's `input_files`, a product
 * update's `source_files`), cached by version like the lists' own (lib/list/cached-list.ts).
 */

/**
 * A file record is current while the file's row (its `last_modified`, which every UPDATE changes:
 * migration 0016) and the workspaces are unchanged.
 */
export const FILE_VERSION = "f.last_modified";

const FILE_SOURCE: RecordSource & { key: string } = {
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

/** The files a record's refs name that exist, in order, as the member `member`. */
function filesByRefs(member: string): Embedded {
	return { member, source: FILE_SOURCE, spec: FILE_RECORD };
}

/** A job update's `input_files`: the files its data's inputs name (its refs), in order. */
export const INPUT_FILES = filesByRefs("input_files");

/**
 * A product update's `source_files`: the source files linked to it as ancestors (directly or
 * through other products), by id (its refs, see PRODUCT_UPDATES_LIST).
 */
export const SOURCE_FILES = filesByRefs("source_files");
