import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * Fewer index entries per ingested file (docs/decisions.md, "Index entries nobody reads"):
 * every entry is written with its row, and again at each update that is not HOT, which here is
 * all of them. Dropped: `trigger_event (type, occurred)`, which no statement reads, and
 * `scale_file (file_name)`, which the partial indexes of sources' and products' names serve
 * (every statement on a file's name names its type). Made partial, leaving out the rows whose
 * key is null or that no statement looks up: an event's rule (null until a rule fires for it;
 * read when a rule is removed), a file's `data_started` (a source has none until parsed; read by
 * ranges), a file's `uuid` (looked up among products only, for what they supersede). Not an
 * execution's node (null while QUEUED): the executions list filters by several nodes with
 * `= ANY($1)`, which a generic plan cannot prove non-null, so a partial index would not serve it.
 */

/** Indexes: name, the definition made here, the definition it had (null: dropped). */
const INDEXES: [string, string | null, string][] = [
	["trigger_event_type_occurred_idx", null, "ON trigger_event (type, occurred)"],
	[
		"trigger_event_rule_id_idx",
		"ON trigger_event (rule_id) WHERE rule_id IS NOT NULL",
		"ON trigger_event (rule_id)"
	],
	["scale_file_file_name_idx", null, "ON scale_file (file_name)"],
	[
		"scale_file_data_started_idx",
		"ON scale_file (data_started) WHERE data_started IS NOT NULL",
		"ON scale_file (data_started)"
	],
	[
		"scale_file_uuid_idx",
		"ON scale_file (uuid) WHERE file_type = 'PRODUCT'",
		"ON scale_file (uuid)"
	]
];

async function remake(
	qi: QueryInterface,
	pick: (made: string | null, had: string) => string | null
) {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		for (const [name, made, had] of INDEXES) {
			await sql(`DROP INDEX IF EXISTS ${name}`);
			const definition = pick(made, had);
			if (definition) await sql(`CREATE INDEX ${name} ${definition}`);
		}
	});
}

export const up: MigrationFn<QueryInterface> = ({ context: qi }) => remake(qi, made => made);

export const down: MigrationFn<QueryInterface> = ({ context: qi }) =>
	remake(qi, (_made, had) => had);
