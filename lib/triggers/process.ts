import type { Sequelize } from "sequelize";
import { intArray } from "../db/array-literal";
import { select, write, transaction, type Sql, type TransactionSql } from "../db/run";
import type { FileTriggerConfiguration } from "../documents/trigger-configuration";
import { queueValidNewJobs } from "../jobs/new-job";
import type { NewJobRequest } from "../jobs/types";
import type { DataFacts } from "../jobs/prepare-job";
import { createEachRecipe, createRecipes, type NewRecipeRequest } from "../recipes/create";

/**
 * The trigger events of ingests and parses turned into jobs (Scale's IngestTriggerHandler and
 * ParseTriggerHandler): each unprocessed INGEST or PARSE event is matched against every active
 * rule of its type, and for each rule that matches, the rule's job is created with the file bound
 * to the rule's `input_data_name` and every output stored in its `workspace_name`. The jobs and
 * the event's `processed` are written in one transaction, so an event is processed exactly once
 * whatever dies when; events are claimed with FOR UPDATE SKIP LOCKED, so replicas share them.
 */

export const FILE_EVENT_TYPES = ["INGEST", "PARSE"] as const;

/** Events claimed per transaction. */
export const EVENT_BATCH = 500;

interface EventRow {
	id: number;
	type: string;
	/** the description's `file_id` when it is a number (matched only when an integer) */
	file_id: number | null;
}

interface RuleRow {
	id: number;
	type: string;
	configuration: FileTriggerConfiguration;
	/** the rule's job type, or null for a recipe type's rule */
	job_type_id: number | null;
	recipe_type_id: number | null;
	outputs: string[];
	workspace_id: number | null;
	workspace_name: string | null;
	workspace_is_active: boolean | null;
}

interface FileRow {
	id: number;
	media_type: string;
	data_type: string[];
	file_size: string;
	is_deleted: boolean;
}

export interface Processed {
	events: number;
	jobs: number;
	recipes: number;
	/** matches whose job could not be created: the rule's job type refused the file */
	refused: { eventId: number; ruleId: number; reason: string }[];
}

/*
 * Both name the events by `id = ANY($1)` beside the join on the unnest, so that PostgreSQL reads
 * them by key: on the join alone it hashed a scan of the whole table (7 of the 11 ms of a batch
 * of 500 at 40,000 events, and growing with the table). See lib/scheduling/place.ts.
 */
/** A copy of each event `$1[i]` naming the rule `$2[i]`, processed, in order. */
export const COPY_EVENTS_SQL = `INSERT INTO trigger_event (type, rule_id, description, occurred,
		processed)
	 SELECT e.type, x.rule_id, e.description, e.occurred, now()
	 FROM unnest($1::int[], $2::int[]) WITH ORDINALITY AS x(event_id, rule_id, n)
	 JOIN trigger_event e ON e.id = x.event_id
	 WHERE e.id = ANY($1::int[]) ORDER BY x.n RETURNING id`;

/** The events `$1` processed, each naming the rule `$2[i]` that fired, unless it names one. */
export const MARK_PROCESSED_SQL = `UPDATE trigger_event e SET processed = now(),
		rule_id = coalesce(e.rule_id, x.rule_id)
	 FROM unnest($1::int[], $2::int[]) AS x(id, rule_id)
	 WHERE e.id = ANY($1::int[]) AND e.id = x.id`;

/** Whether a file meets a rule's condition: its media type exactly, every data type listed. */
export function matchesCondition(
	condition: FileTriggerConfiguration["condition"],
	file: Pick<FileRow, "media_type" | "data_type">
): boolean {
	if (condition.media_type && condition.media_type !== file.media_type) return false;
	return condition.data_types.every(t => file.data_type.includes(t));
}

/**
 * Processes one batch of unprocessed INGEST and PARSE events in one transaction; answers what it
 * did (events 0: nothing was waiting, or other replicas hold what is). A job type's rule creates
 * a job, a recipe type's rule a recipe (lib/recipes/create.ts) with the file bound to the recipe
 * input `input_data_name` and the workspace `workspace_name`.
 */
export async function processFileEvents(db: Sequelize, batch = EVENT_BATCH): Promise<Processed> {
	return transaction(db, async t => {
		// SKIP LOCKED: a replica takes the events no other holds; each is processed once
		const events = await select<EventRow>(
			db,
			// only the file's id of each description: the whole document was parsed into an
			// object for each event, for this one number
			`SELECT id, type, CASE WHEN jsonb_typeof(description->'file_id') = 'number'
				THEN (description->>'file_id')::float8 END AS file_id
			 FROM trigger_event
			 WHERE processed IS NULL AND type = ANY($1::text[])
			 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`,
			[FILE_EVENT_TYPES, batch],
			t
		);
		if (events.length === 0) return { events: 0, jobs: 0, recipes: 0, refused: [] };
		const fileIds = [
			...new Set(
				events.flatMap(e => (Number.isInteger(e.file_id) ? [e.file_id as number] : []))
			)
		];
		const [rules, files] = await Promise.all([
			activeRules(
				db,
				t,
				events.map(e => e.type)
			),
			select<FileRow>(
				db,
				`SELECT id, media_type, data_type, file_size, is_deleted FROM scale_file
				 WHERE id = ANY($1::int[])`,
				[intArray(fileIds)],
				t
			)
		]);
		const fileById = new Map(files.map(f => [f.id, f]));
		const matches = matchEvents(events, rules, fileById);
		const done = await fire(db, t, matches, rules, fileById);
		await write(
			db,
			MARK_PROCESSED_SQL,
			[intArray(events.map(e => e.id)), intArray(events.map(e => done.firstRule.get(e.id)))],
			t
		);
		return {
			events: events.length,
			jobs: done.jobs,
			recipes: done.recipes,
			refused: done.refused
		};
	});
}

/** A file event written by the transaction of its change, and the file it names. */
export interface NewFileEvent {
	type: (typeof FILE_EVENT_TYPES)[number];
	description: { file_id: number } & Record<string, unknown>;
	occurred: Date | string;
	file: FileRow;
}

/**
 * The events of a batch of new files, written processed in the caller's transaction (the one
 * that records the files): each is matched against the active rules of its type, written once
 * naming its first matching rule, and the rules' jobs and recipes are created beside it, as
 * processFileEvents does for events written unprocessed. One write per event instead of an
 * insert, a claim and an update in a second transaction (docs/decisions.md, "Triggers").
 */
export async function recordFileEvents(
	db: Sequelize,
	t: TransactionSql,
	news: NewFileEvent[]
): Promise<Processed> {
	if (news.length === 0) return { events: 0, jobs: 0, recipes: 0, refused: [] };
	const rules = await activeRules(
		db,
		t,
		news.map(e => e.type)
	);
	const fileById = new Map(news.map(e => [e.file.id, e.file]));
	// numbered by position until written: the rule each names is known before its id
	const events = news.map((e, i) => ({ id: i, type: e.type, file_id: e.description.file_id }));
	const matches = matchEvents(events, rules, fileById);
	const first = new Map<number, number>();
	for (const m of matches) if (!first.has(m.event.id)) first.set(m.event.id, m.rule.id);
	const ids = await write<{ id: number }>(
		db,
		INSERT_PROCESSED_SQL,
		[
			JSON.stringify(
				news.map((e, i) => ({
					type: e.type,
					description: e.description,
					occurred: e.occurred,
					rule_id: first.get(i) ?? null
				}))
			)
		],
		t
	);
	events.forEach((e, i) => (e.id = ids[i].id));
	const done = await fire(db, t, matches, rules, fileById);
	return { events: news.length, jobs: done.jobs, recipes: done.recipes, refused: done.refused };
}

/** New events written processed, in the order given, each naming its rule (or none). */
export const INSERT_PROCESSED_SQL = `INSERT INTO trigger_event (type, rule_id, description,
		occurred, processed)
	 SELECT e.type, e.rule_id, e.description, e.occurred, now()
	 FROM ROWS FROM (jsonb_to_recordset($1::jsonb)
		AS (type text, rule_id int, description jsonb, occurred timestamptz)) WITH ORDINALITY
		AS e(type, rule_id, description, occurred, n)
	 ORDER BY e.n RETURNING id`;

/** The active rules of the given event types whose job type or recipe type is active. */
function activeRules(db: Sequelize, t: Sql, types: string[]): Promise<RuleRow[]> {
	return select<RuleRow>(
		db,
		`SELECT r.id, r.type, r.configuration, jt.id AS job_type_id, rt.id AS recipe_type_id,
			coalesce(ARRAY(SELECT o->>'name'
				FROM jsonb_array_elements(jt.interface->'output_data') o), '{}') AS outputs,
			w.id AS workspace_id, w.name AS workspace_name, w.is_active AS workspace_is_active
		 FROM trigger_rule r
		 LEFT JOIN job_type jt ON jt.trigger_rule_id = r.id AND jt.is_active
		 LEFT JOIN recipe_type rt ON rt.trigger_rule_id = r.id AND rt.is_active
		 LEFT JOIN workspace w ON w.name = r.configuration->'data'->>'workspace_name'
		 WHERE r.type = ANY($1::text[]) AND r.is_active AND r.archived IS NULL
			AND (jt.id IS NOT NULL OR rt.id IS NOT NULL)
		 ORDER BY r.id`,
		[[...new Set(types)]],
		t
	);
}

/** Each event with each rule of its type whose condition its file meets, in order. */
function matchEvents(
	events: EventRow[],
	rules: RuleRow[],
	fileById: Map<number, FileRow>
): { event: EventRow; rule: RuleRow }[] {
	const matches: { event: EventRow; rule: RuleRow }[] = [];
	for (const event of events) {
		const file = fileById.get(event.file_id as number);
		if (!file) continue;
		for (const rule of rules)
			if (rule.type === event.type && matchesCondition(rule.configuration.condition, file))
				matches.push({ event, rule });
	}
	return matches;
}

/**
 * The jobs and recipes of the matches, created in `t`; answers them and each event's first rule
 * (the one the event names).
 */
async function fire(
	db: Sequelize,
	t: TransactionSql,
	matches: { event: EventRow; rule: RuleRow }[],
	rules: RuleRow[],
	fileById: Map<number, FileRow>
): Promise<Omit<Processed, "events"> & { firstRule: Map<number, number> }> {
	// A job's event names the rule that fired: the event itself for its first match, a copy
	// of it (processed at once) for each further one, as Scale made one event per rule.
	const firstRule = new Map<number, number>();
	const extra: { event: EventRow; rule: RuleRow }[] = [];
	for (const m of matches) {
		if (!firstRule.has(m.event.id)) firstRule.set(m.event.id, m.rule.id);
		else extra.push(m);
	}
	const extraIds =
		extra.length === 0
			? []
			: (
					await write<{ id: number }>(
						db,
						COPY_EVENTS_SQL,
						[extra.map(m => m.event.id), extra.map(m => m.rule.id)],
						t
					)
				).map(row => row.id);
	const extraEvent = new Map(extra.map((m, i) => [m, extraIds[i]]));
	const jobMatches = matches.filter(m => m.rule.job_type_id !== null);
	const requests: NewJobRequest[] = jobMatches.map(m => ({
		jobTypeId: m.rule.job_type_id as number,
		eventId: extraEvent.get(m) ?? m.event.id,
		jobData: {
			version: "1.0",
			input_data: [
				{
					name: m.rule.configuration.data.input_data_name,
					file_id: m.event.file_id
				}
			],
			output_data: m.rule.outputs.map(name => ({
				name,
				workspace_id: m.rule.workspace_id
			}))
		},
		dataField: `trigger_rule ${m.rule.id}`,
		// every job of a rule has the same data but for its file (an id checked above)
		dataTemplate: `trigger_rule ${m.rule.id}`
	}));
	// the jobs' files and workspaces are those just read, in this transaction
	const facts: DataFacts = { files: fileById, workspaces: new Map() };
	for (const r of rules)
		if (r.workspace_id !== null)
			facts.workspaces.set(r.workspace_id, {
				id: r.workspace_id,
				name: r.workspace_name as string,
				is_active: r.workspace_is_active as boolean
			});
	const queued = await queueValidNewJobs(db, t, requests, facts);
	// a recipe per matching recipe type's rule, all checked and written together
	// (createRecipes: a refused one is answered its error, nothing of it written)
	const recipeMatches = matches.filter(m => m.rule.recipe_type_id !== null);
	const recipeRequests: NewRecipeRequest[] = recipeMatches.map(m => {
		const data: Record<string, unknown> = {
			version: "1.0",
			input_data: [
				{
					name: m.rule.configuration.data.input_data_name,
					file_id: m.event.file_id
				}
			]
		};
		if (m.rule.workspace_id !== null) data.workspace_id = m.rule.workspace_id;
		return {
			recipeTypeId: m.rule.recipe_type_id as number,
			data,
			eventId: extraEvent.get(m) ?? m.event.id
		};
	});
	// each try in a savepoint: a database error rolls back only its own writes
	const created = await createEachRecipe(
		batch => t.savepoint(savepoint => createRecipes(savepoint, batch)),
		recipeRequests
	);
	const refused: Processed["refused"] = created.flatMap((c, i) =>
		c instanceof Error
			? [
					{
						eventId: recipeMatches[i].event.id,
						ruleId: recipeMatches[i].rule.id,
						reason: c.message
					}
				]
			: []
	);
	const recipes = created.length - refused.length;
	const jobsRefused = queued.flatMap((q, i) =>
		q instanceof Error
			? [
					{
						eventId: jobMatches[i].event.id,
						ruleId: jobMatches[i].rule.id,
						reason: q.message
					}
				]
			: []
	);
	return {
		jobs: queued.length - jobsRefused.length,
		recipes,
		refused: [...jobsRefused, ...refused],
		firstRule
	};
}
