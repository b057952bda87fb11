import { BadRequestError, FieldError } from "../errors";
import type { Sql } from "../db/run";

/**
 * The cluster-wide scheduler settings (the single `scheduler` row): Scale's GET|PATCH
 * /scheduler/, with the node error settings beside the pause.
 */

export interface SchedulerSettings {
	is_paused: boolean;
	/** minutes over which a node's SYSTEM failures are counted */
	node_error_period: number;
	/** SYSTEM failures within the period that pause a node */
	max_node_errors: number;
	num_message_handlers: number;
	system_logging_level: string;
}

export const SETTINGS_FIELDS = ["is_paused", "node_error_period", "max_node_errors"] as const;

const COLUMNS = `is_paused, node_error_period, max_node_errors, num_message_handlers,
	system_logging_level`;

function shape(row: any): SchedulerSettings {
	return {
		is_paused: row.is_paused,
		node_error_period: row.node_error_period,
		max_node_errors: Number(row.max_node_errors),
		num_message_handlers: row.num_message_handlers,
		system_logging_level: row.system_logging_level
	};
}

export async function getSchedulerSettings(sql: Sql): Promise<SchedulerSettings> {
	const [row] = await sql.query(`SELECT ${COLUMNS} FROM scheduler WHERE id = 1`);
	if (!row) throw new Error("the scheduler settings row (id 1) is missing");
	return shape(row);
}

export interface SettingsEdit {
	is_paused?: boolean;
	node_error_period?: number;
	max_node_errors?: number;
}

/**
 * Checks a PATCH body: the known fields with their types; at least one of them. Unknown fields
 * are ignored, as everywhere but the node and job edits.
 */
export function parseSettingsEdit(body: Record<string, unknown>): SettingsEdit {
	const edit: SettingsEdit = {};
	if ("is_paused" in body) {
		if (typeof body.is_paused !== "boolean")
			throw new FieldError("is_paused", "must be a boolean");
		edit.is_paused = body.is_paused;
	}
	if ("node_error_period" in body) {
		const v = body.node_error_period;
		if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > 525600)
			throw new FieldError(
				"node_error_period",
				"must be an integer of minutes from 1 to 525600"
			);
		edit.node_error_period = v as number;
	}
	if ("max_node_errors" in body) {
		const v = body.max_node_errors;
		if (typeof v !== "number" || !Number.isFinite(v) || v < 1)
			throw new FieldError("max_node_errors", "must be a number of at least 1");
		edit.max_node_errors = v;
	}
	if (Object.keys(edit).length === 0)
		throw new BadRequestError(
			`No fields specified for update (allowed: ${SETTINGS_FIELDS.join(", ")})`
		);
	return edit;
}

export async function updateSchedulerSettings(
	sql: Sql,
	edit: SettingsEdit
): Promise<SchedulerSettings> {
	const [row] = await sql.query(
		`UPDATE scheduler SET is_paused = coalesce($1, is_paused),
			node_error_period = coalesce($2, node_error_period),
			max_node_errors = coalesce($3, max_node_errors), last_modified = now()
		 WHERE id = 1 RETURNING ${COLUMNS}`,
		[edit.is_paused ?? null, edit.node_error_period ?? null, edit.max_node_errors ?? null]
	);
	if (!row) throw new Error("the scheduler settings row (id 1) is missing");
	return shape(row);
}
