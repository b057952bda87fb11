import type { Sequelize } from "sequelize";
import { select, write, type Sql } from "../db/run";
import { BadRequestError, FieldError, NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { ListSource } from "../list/types";
import type { Warning } from "../documents/types";

export const ERROR_CATEGORIES = ["SYSTEM", "ALGORITHM", "DATA"] as const;
export type ErrorCategory = (typeof ERROR_CATEGORIES)[number];

export interface ErrorRow {
	id: number;
	name: string;
	title: string | null;
	description: string | null;
	category: ErrorCategory;
	is_builtin: boolean;
	created: Date;
	last_modified: Date;
}

export function serializeError(row: ErrorRow) {
	return {
		id: row.id,
		name: row.name,
		title: row.title,
		description: row.description,
		category: row.category,
		is_builtin: row.is_builtin,
		created: formatDatetime(row.created),
		last_modified: formatDatetime(row.last_modified)
	};
}

export const ERROR_LIST: ListSource = {
	from: "error",
	columns: "*",
	orderable: {
		id: "id",
		name: "name",
		title: "title",
		description: "description",
		category: "category",
		is_builtin: "is_builtin",
		created: "created",
		last_modified: "last_modified"
	},
	defaultOrder: ["name"],
	timeColumn: "last_modified",
	filters: {
		name: { column: "name", type: "string" },
		category: { column: "category", type: "enum", values: [...ERROR_CATEGORIES] },
		is_builtin: { column: "is_builtin", type: "boolean" }
	}
};

export async function getError(db: Sequelize, id: number): Promise<ErrorRow> {
	const [row] = await select<ErrorRow>(db, "SELECT * FROM error WHERE id = $1", [id]);
	if (!row) throw new NotFoundError(`No error with id ${id}`);
	return row;
}

export interface NewError {
	name: string;
	title?: string | null;
	description?: string | null;
	category: "ALGORITHM" | "DATA";
}

export async function createError(db: Sequelize, e: NewError): Promise<ErrorRow> {
	// ON CONFLICT instead of a prior SELECT: two concurrent creates of one name cannot both pass.
	const [row] = await write<ErrorRow>(
		db,
		`INSERT INTO error (name, title, description, category) VALUES ($1, $2, $3, $4)
		 ON CONFLICT (name) DO NOTHING RETURNING *`,
		[e.name, e.title ?? null, e.description ?? null, e.category]
	);
	if (!row) throw new FieldError("name", `an error named "${e.name}" already exists`);
	return row;
}

export interface ErrorEdit {
	title?: string | null;
	description?: string | null;
	category?: ErrorCategory;
}

export async function updateError(db: Sequelize, id: number, edit: ErrorEdit): Promise<ErrorRow> {
	// The guard on is_builtin is in the UPDATE itself, so a check-then-write race cannot slip by.
	const [row] = await write<ErrorRow>(
		db,
		`UPDATE error SET
			title = CASE WHEN $2::boolean THEN $3 ELSE title END,
			description = CASE WHEN $4::boolean THEN $5 ELSE description END,
			category = COALESCE($6, category),
			last_modified = now()
		 WHERE id = $1 AND NOT is_builtin RETURNING *`,
		[
			id,
			"title" in edit,
			edit.title ?? null,
			"description" in edit,
			edit.description ?? null,
			edit.category ?? null
		]
	);
	if (row) return row;
	const existing = await getError(db, id);
	throw new BadRequestError(`Error "${existing.name}" is built in and cannot be edited`);
}

/** An error as a configuration export carries it: no id, no timestamps. */
export interface ExportedError {
	name: string;
	title: string | null;
	description: string | null;
	category: ErrorCategory;
}

export interface ErrorExportFilter {
	ids?: number[];
	names?: string[];
}

/**
 * Errors for a configuration export, by name. SYSTEM and built-in errors belong to the service
 * (every installation has them) and are never exported. Each filter given (even empty) must match; filters left undefined match all.
 */
export async function exportErrors(
	db: Sequelize,
	filter: ErrorExportFilter
): Promise<ExportedError[]> {
	return select<ExportedError>(
		db,
		`SELECT name, title, description, category FROM error
		 WHERE category <> 'SYSTEM' AND NOT is_builtin
		   AND ($1::int[] IS NULL OR id = ANY($1::int[]))
		   AND ($2::text[] IS NULL OR name = ANY($2::text[]))
		 ORDER BY name`,
		[filter.ids ?? null, filter.names ?? null]
	);
}

/** An error as an import gives it: only the name is required; absent fields keep their value. */
export interface ImportedError {
	name: string;
	title?: string | null;
	description?: string | null;
	category?: ErrorCategory;
}

/**
 * Creates or updates an error by name for a configuration import, inside the import's
 * transaction. SYSTEM errors are the service's own: importing one is refused. A built-in error
 * (which every installation has) is left as it is, with a warning.
 */
export async function importError(
	db: Sequelize,
	e: ImportedError,
	t: Sql,
	field: string
): Promise<Warning[]> {
	if (e.category === "SYSTEM")
		throw new FieldError(`${field}.category`, `SYSTEM errors cannot be imported ("${e.name}")`);
	const [existing] = await select<ErrorRow>(
		db,
		"SELECT * FROM error WHERE name = $1 FOR UPDATE",
		[e.name],
		t
	);
	if (!existing) {
		if (!e.category)
			throw new FieldError(`${field}.category`, `is required for the new error "${e.name}"`);
		await write(
			db,
			"INSERT INTO error (name, title, description, category) VALUES ($1, $2, $3, $4)",
			[e.name, e.title ?? null, e.description ?? null, e.category],
			t
		);
		return [];
	}
	if (existing.is_builtin)
		return [{ id: "builtin-error", details: `Built-in error is kept as it is: ${e.name}` }];
	if (existing.category === "SYSTEM")
		throw new FieldError(
			`${field}.name`,
			`"${e.name}" is a SYSTEM error and cannot be edited by an import`
		);
	await write(
		db,
		`UPDATE error SET
			title = CASE WHEN $2::boolean THEN $3 ELSE title END,
			description = CASE WHEN $4::boolean THEN $5 ELSE description END,
			category = COALESCE($6, category),
			last_modified = now()
		 WHERE id = $1`,
		[
			existing.id,
			"title" in e,
			e.title ?? null,
			"description" in e,
			e.description ?? null,
			e.category ?? null
		],
		t
	);
	return [];
}
