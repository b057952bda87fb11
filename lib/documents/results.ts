import { FieldError } from "../errors";
import { Iso8601Error, parseDatetime } from "../validation/schema";
import {
	assertSchema,
	compileChecker,
	type Checker,
	checkStorableText
} from "../validation/schema";
import { ID_SCHEMA } from "../validation/ids";

/**
 * The results manifest an algorithm writes as results_manifest.json in its output directory
 * (Scale 3.0's job/configuration/results/results_manifest/ and
 * docs/algorithm_integration/results_manifest.rst). Version 1.1 is current; 1.0 is read and
 * converted to 1.1.
 */
export const RESULTS_MANIFEST_VERSION = "1.1";

export interface GeoMetadata {
	/** ISO-8601 with a timezone, as written */
	data_started?: string;
	/** ISO-8601 with a timezone, as written */
	data_ended?: string;
	/** GeoJSON extents (Scale wants a 3D geometry; not checked here) */
	geo_json?: Record<string, unknown>;
}

export interface ManifestFile {
	/** the file's local path on the node that ran the algorithm */
	path: string;
	geo_metadata?: GeoMetadata;
}

/** One output: exactly one of `file` (a file output) and `files` (a files output). */
export interface ManifestOutput {
	name: string;
	file?: ManifestFile;
	files?: ManifestFile[];
}

export interface ParseResult {
	filename: string;
	new_workspace_path?: string;
	data_types?: string[];
	geo_metadata?: GeoMetadata;
	gis_data_path?: string;
}

/** A results manifest, always in the 1.1 shape. */
export interface ResultsManifest {
	version: "1.1";
	output_data: ManifestOutput[];
	parse_results: ParseResult[];
	info?: unknown[];
	/** filled with [] when absent, as Scale does */
	errors?: unknown[];
}

const TEXT = { type: "string", minLength: 1 };
const STRINGS = { type: "array", items: { type: "string" } };
// Scale's schemas leave entries open (no additionalProperties): unknown fields are ignored.
const GEO_METADATA = {
	type: "object",
	properties: {
		data_started: { type: "string" },
		data_ended: { type: "string" },
		geo_json: { type: "object" }
	}
};
const FILE = {
	type: "object",
	required: ["path"],
	properties: { path: TEXT, geo_metadata: GEO_METADATA }
};

/** Scale's 1.1 RESULTS_MANIFEST_SCHEMA, with gis_data_path (documented for 1.1) added. */
export const RESULTS_MANIFEST_SCHEMA = {
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string" },
		output_data: {
			type: "array",
			items: {
				type: "object",
				required: ["name"],
				properties: {
					name: TEXT,
					file: FILE,
					files: { type: "array", items: FILE }
				}
			}
		},
		parse_results: {
			type: "array",
			items: {
				type: "object",
				required: ["filename"],
				properties: {
					filename: TEXT,
					new_workspace_path: { type: "string" },
					data_types: STRINGS,
					geo_metadata: GEO_METADATA,
					gis_data_path: { type: "string" }
				}
			}
		},
		info: { type: "array" },
		errors: { type: "array" }
	}
};

/**
 * Scale's 1.0 schema. Its parse_results entries are open, and Scale copied them into 1.1 as they
 * were, so new_workspace_path and geo_metadata found there are honoured as well.
 */
export const RESULTS_MANIFEST_1_0_SCHEMA = {
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string" },
		files: {
			type: "array",
			items: {
				type: "object",
				required: ["name"],
				properties: {
					name: TEXT,
					path: TEXT,
					paths: { type: "array", items: TEXT }
				}
			}
		},
		parse_results: {
			type: "array",
			items: {
				type: "object",
				required: ["filename"],
				properties: {
					filename: TEXT,
					data_started: { type: "string" },
					data_ended: { type: "string" },
					data_types: STRINGS,
					gis_data_path: { type: "string" },
					new_workspace_path: { type: "string" },
					geo_metadata: GEO_METADATA
				}
			}
		},
		info: { type: "array" },
		errors: { type: "array" }
	}
};

const check11: Checker = compileChecker(RESULTS_MANIFEST_SCHEMA);
const check10: Checker = compileChecker(RESULTS_MANIFEST_1_0_SCHEMA);

interface RawGeo {
	data_started?: string;
	data_ended?: string;
	geo_json?: Record<string, unknown>;
}
interface RawFile {
	path: string;
	geo_metadata?: RawGeo;
}
interface Raw11 {
	version?: string;
	output_data?: { name: string; file?: RawFile; files?: RawFile[] }[];
	parse_results?: (ParseResult & { geo_metadata?: RawGeo })[];
	info?: unknown[];
	errors?: unknown[];
}
interface Raw10 {
	version?: string;
	files?: { name: string; path?: string; paths?: string[] }[];
	parse_results?: {
		filename: string;
		data_started?: string;
		data_ended?: string;
		data_types?: string[];
		gis_data_path?: string;
		new_workspace_path?: string;
		geo_metadata?: RawGeo;
	}[];
	info?: unknown[];
	errors?: unknown[];
}

/**
 * Checks a results manifest and answers it in the 1.1 shape (version "1.1", output_data and
 * parse_results default [], errors default [] as in Scale; info kept when given; unknown fields
 * inside entries ignored, as Scale's schema allows them). Throws FieldError under `field`, at the
 * place in the document as written (1.0 paths for a 1.0 manifest).
 *
 * Version: absent means 1.1 — except a manifest without version that has `files` and no
 * `output_data`, which can only be 1.0 and is read as 1.0. "1.0" is converted: `files` entries
 * `{name, path}` / `{name, paths}` become `{name, file: {path}}` / `{name, files: [{path}...]}`;
 * parse_results' data_started and data_ended move into geo_metadata (Scale 3.0 copied them
 * unmoved, so it lost them). Any other version is refused.
 *
 * Rules: output names are unique and each output has exactly one of file and files (path and
 * paths in 1.0); parse_results filenames are unique; data_started and data_ended are ISO-8601
 * datetimes with a timezone; geo_json is an object. Whether outputs match the job interface is
 * the caller's check.
 */
export function parseResultsManifest(doc: unknown, field = "results_manifest"): ResultsManifest {
	const isObject = typeof doc === "object" && doc !== null && !Array.isArray(doc);
	const given = (isObject ? doc : {}) as Record<string, unknown>;
	const version =
		given.version ??
		("files" in given && !("output_data" in given) ? "1.0" : RESULTS_MANIFEST_VERSION);
	if (typeof version === "string" && version !== "1.0" && version !== RESULTS_MANIFEST_VERSION)
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: 1.1, 1.0)`
		);
	assertSchema(version === "1.0" ? check10 : check11, doc, field);
	checkStorableText(doc, field);
	const manifest =
		version === "1.0" ? convert10(doc as Raw10, field) : read11(doc as Raw11, field);
	const filenames = new Map<string, number>();
	manifest.parse_results.forEach((result, i) => {
		const first = filenames.get(result.filename);
		if (first !== undefined)
			throw new FieldError(
				`${field}.parse_results[${i}].filename`,
				`"${result.filename}" is already parsed at parse_results[${first}]`
			);
		filenames.set(result.filename, i);
	});
	const given11 = doc as Raw11;
	if (given11.info !== undefined) manifest.info = structuredClone(given11.info);
	manifest.errors = structuredClone(given11.errors ?? []);
	return manifest;
}

function read11(given: Raw11, field: string): ResultsManifest {
	const names = new Map<string, number>();
	const outputs = (given.output_data ?? []).map((entry, i): ManifestOutput => {
		const at = `${field}.output_data[${i}]`;
		checkUniqueName(names, entry.name, i, `${at}.name`, "output_data");
		if (entry.file !== undefined && entry.files !== undefined)
			throw new FieldError(at, "must have file or files, not both");
		if (entry.file !== undefined)
			return { name: entry.name, file: readFile(entry.file, `${at}.file`) };
		if (entry.files !== undefined)
			return {
				name: entry.name,
				files: entry.files.map((f, j) => readFile(f, `${at}.files[${j}]`))
			};
		throw new FieldError(at, "must have either file or files");
	});
	const parseResults = (given.parse_results ?? []).map((entry, i): ParseResult => {
		const at = `${field}.parse_results[${i}]`;
		const result: ParseResult = { filename: entry.filename };
		if (entry.new_workspace_path !== undefined)
			result.new_workspace_path = entry.new_workspace_path;
		if (entry.data_types !== undefined) result.data_types = [...entry.data_types];
		if (entry.geo_metadata !== undefined)
			result.geo_metadata = readGeo(entry.geo_metadata, `${at}.geo_metadata`);
		if (entry.gis_data_path !== undefined) result.gis_data_path = entry.gis_data_path;
		return result;
	});
	return { version: RESULTS_MANIFEST_VERSION, output_data: outputs, parse_results: parseResults };
}

function convert10(given: Raw10, field: string): ResultsManifest {
	const names = new Map<string, number>();
	const outputs = (given.files ?? []).map((entry, i): ManifestOutput => {
		const at = `${field}.files[${i}]`;
		checkUniqueName(names, entry.name, i, `${at}.name`, "files");
		if (entry.path !== undefined && entry.paths !== undefined)
			throw new FieldError(at, "must have path or paths, not both");
		if (entry.path !== undefined) return { name: entry.name, file: { path: entry.path } };
		if (entry.paths !== undefined)
			return { name: entry.name, files: entry.paths.map(path => ({ path })) };
		throw new FieldError(at, "must have either path or paths");
	});
	const parseResults = (given.parse_results ?? []).map((entry, i): ParseResult => {
		const at = `${field}.parse_results[${i}]`;
		const result: ParseResult = { filename: entry.filename };
		if (entry.new_workspace_path !== undefined)
			result.new_workspace_path = entry.new_workspace_path;
		if (entry.data_types !== undefined) result.data_types = [...entry.data_types];
		// The documented 1.0 fields win over a geo_metadata the entry may also carry.
		const geo: GeoMetadata =
			entry.geo_metadata !== undefined
				? readGeo(entry.geo_metadata, `${at}.geo_metadata`)
				: {};
		if (entry.data_started !== undefined)
			geo.data_started = checkDatetime(entry.data_started, `${at}.data_started`);
		if (entry.data_ended !== undefined)
			geo.data_ended = checkDatetime(entry.data_ended, `${at}.data_ended`);
		if (entry.geo_metadata !== undefined || Object.keys(geo).length > 0)
			result.geo_metadata = geo;
		if (entry.gis_data_path !== undefined) result.gis_data_path = entry.gis_data_path;
		return result;
	});
	return { version: RESULTS_MANIFEST_VERSION, output_data: outputs, parse_results: parseResults };
}

function checkUniqueName(
	names: Map<string, number>,
	name: string,
	i: number,
	at: string,
	list: string
): void {
	const first = names.get(name);
	if (first !== undefined)
		throw new FieldError(at, `"${name}" is already registered at ${list}[${first}]`);
	names.set(name, i);
}

function readFile(file: RawFile, at: string): ManifestFile {
	const result: ManifestFile = { path: file.path };
	if (file.geo_metadata !== undefined)
		result.geo_metadata = readGeo(file.geo_metadata, `${at}.geo_metadata`);
	return result;
}

function readGeo(geo: RawGeo, at: string): GeoMetadata {
	const result: GeoMetadata = {};
	if (geo.data_started !== undefined)
		result.data_started = checkDatetime(geo.data_started, `${at}.data_started`);
	if (geo.data_ended !== undefined)
		result.data_ended = checkDatetime(geo.data_ended, `${at}.data_ended`);
	if (geo.geo_json !== undefined) result.geo_json = structuredClone(geo.geo_json);
	return result;
}

function checkDatetime(text: string, at: string): string {
	try {
		parseDatetime(text);
	} catch (error) {
		if (error instanceof Iso8601Error)
			throw new FieldError(at, `${error.message} (ISO-8601 with a timezone expected)`);
		throw error;
	}
	return text;
}

/** One `ARTIFACT:<output_name>:<path>` line of an algorithm's standard output. */
export interface Artifact {
	name: string;
	path: string;
}

/**
 * The artifacts an algorithm printed: lines of exactly `ARTIFACT:<output_name>:<path>` from the
 * start of the line (Scale's `^ARTIFACT:([^:]*):(.*)`); the name runs to the first colon after
 * `ARTIFACT:`, the path is the rest of the line and may contain colons. A trailing carriage
 * return is dropped; lines with an empty name or path are ignored. In order of appearance.
 */
export function parseArtifactLines(stdout: string): Artifact[] {
	const artifacts: Artifact[] = [];
	for (const line of stdout.split("\n")) {
		const match = /^ARTIFACT:([^:]+):(.+)$/.exec(
			line.endsWith("\r") ? line.slice(0, -1) : line
		);
		if (match) artifacts.push({ name: match[1], path: match[2] });
	}
	return artifacts;
}

/**
 * Adds the printed artifacts to a manifest, as Scale's add_files does, answering a new manifest
 * (the given one is not changed). The manifest wins: artifacts whose name is already an output
 * of the manifest are ignored. The others are grouped by name, in order of first appearance, and
 * appended: one line for a name gives `{name, file: {path}}`, several give
 * `{name, files: [{path}, ...]}` in line order. This does not look at the job interface, so a
 * files output registered with a single ARTIFACT line comes out as `file` (as in Scale); the
 * caller matching outputs to the interface decides what to accept.
 */
export function mergeArtifacts(manifest: ResultsManifest, artifacts: Artifact[]): ResultsManifest {
	const inManifest = new Set(manifest.output_data.map(output => output.name));
	const paths = new Map<string, string[]>();
	for (const artifact of artifacts) {
		if (inManifest.has(artifact.name)) continue;
		const list = paths.get(artifact.name);
		if (list) list.push(artifact.path);
		else paths.set(artifact.name, [artifact.path]);
	}
	const added = [...paths].map(([name, list]): ManifestOutput =>
		list.length === 1
			? { name, file: { path: list[0] } }
			: { name, files: list.map(path => ({ path })) }
	);
	const merged = structuredClone(manifest);
	merged.output_data.push(...added);
	return merged;
}

/**
 * Job results: the product files a job produced, by output name (Scale 3.0's
 * job/configuration/results/job_results.py).
 *
 * Version: we write "1.0". Scale 3.0's JobResults always writes `{"version": "1.0", ...}`, its
 * REST samples (job and job execution details) show "1.0", and no 1.1 definition of this
 * document exists anywhere in Scale 3.0; the spec's "job results 1.1" most likely repeats the
 * results manifest's version. A "1.1" document is accepted on read as the same shape (nothing
 * else could be meant by it) and normalised to "1.0", so every stored document reads alike.
 */
export const JOB_RESULTS_VERSION = "1.0";
const READABLE_VERSIONS = ["1.0", "1.1"];

export interface FileResult {
	name: string;
	file_id: number;
}
export interface FilesResult {
	name: string;
	file_ids: number[];
}
export type OutputResult = FileResult | FilesResult;

export interface JobResults {
	version: "1.0";
	output_data: OutputResult[];
}

export const JOB_RESULTS_SCHEMA = {
	type: "object",
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		output_data: {
			type: "array",
			items: {
				type: "object",
				required: ["name"],
				additionalProperties: false,
				properties: {
					name: { type: "string", minLength: 1 },
					file_id: ID_SCHEMA,
					file_ids: { type: "array", minItems: 1, items: ID_SCHEMA }
				}
			}
		}
	}
};

const checkShape: Checker = compileChecker(JOB_RESULTS_SCHEMA);

/**
 * Checks a job results document and answers a normalised copy (version "1.0", output_data
 * default []). Each entry has a name and exactly one of `file_id` (a file output) and `file_ids`
 * (a files output, non-empty); names are unique. Throws FieldError under `field`.
 */
export function parseJobResults(doc: unknown, field = "results"): JobResults {
	assertSchema(checkShape, doc, field);
	checkStorableText(doc, field);
	const given = doc as {
		version?: string;
		output_data?: { name: string; file_id?: number; file_ids?: number[] }[];
	};
	const version = given.version ?? JOB_RESULTS_VERSION;
	if (!READABLE_VERSIONS.includes(version))
		throw new FieldError(
			`${field}.version`,
			`"${version}" is an unsupported version (supported: ${READABLE_VERSIONS.join(", ")})`
		);
	const seen = new Set<string>();
	const outputs = (given.output_data ?? []).map((entry, i): OutputResult => {
		const at = `${field}.output_data[${i}]`;
		if (seen.has(entry.name))
			throw new FieldError(`${at}.name`, `"${entry.name}" is given more than once`);
		seen.add(entry.name);
		if (entry.file_id !== undefined && entry.file_ids !== undefined)
			throw new FieldError(`${at}.file_ids`, "is not allowed together with file_id");
		if (entry.file_id !== undefined) return { name: entry.name, file_id: entry.file_id };
		if (entry.file_ids !== undefined)
			return { name: entry.name, file_ids: [...entry.file_ids] };
		throw new FieldError(at, "must have file_id or file_ids");
	});
	return { version: JOB_RESULTS_VERSION, output_data: outputs };
}

/** One output's stored products, for buildJobResults. */
export interface ResultEntry {
	name: string;
	/** the ids of the product files, in order */
	fileIds: number[];
	/** true for a files output (→ file_ids), false for a file output (→ file_id) */
	multiple: boolean;
}

/**
 * Builds the job results document from the products stored per output, as Scale's
 * store_output_data_files does: `file_ids` for a files output, `file_id` for a file output. An
 * output with no products gets no entry (an optional output the job did not produce). A file
 * output with several products is a programming error (the manifest check comes first) and
 * throws a plain Error; so does a name given twice.
 */
export function buildJobResults(entries: ResultEntry[]): JobResults {
	const seen = new Set<string>();
	const outputs: OutputResult[] = [];
	for (const entry of entries) {
		if (seen.has(entry.name))
			throw new Error(`job results: output "${entry.name}" given twice`);
		seen.add(entry.name);
		if (entry.fileIds.length === 0) continue;
		if (entry.multiple) {
			outputs.push({ name: entry.name, file_ids: [...entry.fileIds] });
		} else if (entry.fileIds.length === 1) {
			outputs.push({ name: entry.name, file_id: entry.fileIds[0] });
		} else {
			throw new Error(
				`job results: file output "${entry.name}" has ${entry.fileIds.length} files`
			);
		}
	}
	return { version: JOB_RESULTS_VERSION, output_data: outputs };
}
