import type { QueryInterface } from "sequelize";
import {
	down,
	GUARDED_REFERENCES,
	up
} from "../../migrations/0021-references-to-configuration-guarded-at-delete";
import * as writtenTogether from "../../migrations/0022-references-between-rows-written-together";
import { createTestDatabase, sqlOn, type TestDatabase } from "../helpers/db";

/**
 * Migration 0021: a configuration row (job type, revision, workspace, strike) that a job,
 * execution, queue row, file or ingest still names cannot be deleted, as the foreign keys it
 * replaced refused; one nothing names can; a deleted trigger rule leaves its events without one.
 */

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
});

afterAll(() => test.drop());

const { query, one, failure } = sqlOn(() => test.db);

/** A job type with a revision; answers both ids. */
async function jobType(name: string): Promise<{ type: number; rev: number }> {
	const { id: type } = await one<{ id: number }>(
		`INSERT INTO job_type (name, version, interface) VALUES ($1, '1.0', '{}') RETURNING id`,
		[name]
	);
	const { id: rev } = await one<{ id: number }>(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, '{}')
		 RETURNING id`,
		[type]
	);
	return { type, rev };
}

async function event(ruleId: number | null = null): Promise<number> {
	return (
		await one<{ id: number }>(
			`INSERT INTO trigger_event (type, rule_id, description) VALUES ('USER', $1, '{}')
			 RETURNING id`,
			[ruleId]
		)
	).id;
}

async function job(t: { type: number; rev: number }): Promise<number> {
	return (
		await one<{ id: number }>(
			`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
				timeout, max_tries, data)
			 VALUES ($1, $2, $3, 'PENDING', 100, 0, 60, 1, '{}') RETURNING id`,
			[t.type, t.rev, await event()]
		)
	).id;
}

/** An execution of the job, of its job type; answers its id. */
async function execution(jobId: number, status: string): Promise<number> {
	return (
		await one<{ id: number }>(
			`INSERT INTO job_exe (job_id, job_type_id, status, timeout)
			 SELECT id, job_type_id, $2, 60 FROM job WHERE id = $1 RETURNING id`,
			[jobId, status]
		)
	).id;
}

describe("references to configuration rows (0021)", () => {
	it("has no foreign key left of those it replaced", async () => {
		const names = await query<{ conname: string }>(
			`SELECT conname FROM pg_constraint WHERE contype = 'f' AND conname = ANY($1::text[])`,
			[GUARDED_REFERENCES.map(r => r[3])]
		);
		expect(names).toEqual([]);
	});

	it("refuses to delete a job type or revision a job names, and deletes one nothing names", async () => {
		const used = await jobType("used");
		const jobId = await job(used);
		const refused = await failure(`DELETE FROM job_type_rev WHERE id = $1`, [used.rev]);
		expect(refused?.[0]).toBe("23503");
		expect(refused?.[1]).toMatch(/job_type_rev \d+ is still named by job\.job_type_rev_id/);
		// the revision's own key (job_type_rev → job_type, CASCADE) is not what refuses here
		expect((await failure(`DELETE FROM job_type WHERE id = $1`, [used.type]))?.[1]).toMatch(
			/job_type \d+ is still named by job\.job_type_id/
		);
		expect(await one(`SELECT count(*)::int AS n FROM job WHERE id = $1`, [jobId])).toEqual({
			n: 1
		});

		const unused = await jobType("unused");
		expect(await failure(`DELETE FROM job_type WHERE id = $1`, [unused.type])).toBeNull();
		expect(
			await one(`SELECT count(*)::int AS n FROM job_type_rev WHERE id = $1`, [unused.rev])
		).toEqual({ n: 0 });
	});

	it("refuses to delete a job type an execution, a queue row or a product names", async () => {
		const { id: ws } = await one<{ id: number }>(
			`INSERT INTO workspace (name, title, json_config) VALUES ('products', 'p', '{}')
			 RETURNING id`
		);
		/** Writes a row of `table` naming `typeId` beside its own job (of another type). */
		const writers: Record<string, (jobId: number, typeId: number) => Promise<unknown>> = {
			job_exe: (jobId, typeId) =>
				query(
					`INSERT INTO job_exe (job_id, job_type_id, status, timeout)
					 VALUES ($1, $2, 'QUEUED', 60)`,
					[jobId, typeId]
				),
			queue: async (jobId, typeId) => {
				const exe = await execution(jobId, "QUEUED");
				await query(
					`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
						mem_required, disk_in_required, disk_out_required, disk_total_required)
					 VALUES ($1, $2, $3, 100, 1, 1, 0, 0, 0)`,
					[exe, jobId, typeId]
				);
			},
			scale_file: async (jobId, typeId) => {
				const exe = await execution(jobId, "COMPLETED");
				await query(
					`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path,
						media_type, uuid, job_type_id, job_id, job_exe_id)
					 VALUES ('PRODUCT', $1, 'product', 'product', 'text/plain', 'u', $2, $3, $4)`,
					[ws, typeId, jobId, exe]
				);
			}
		};
		for (const [table, write] of Object.entries(writers)) {
			const named = await jobType(`named-by-${table}`);
			const jobId = await job(await jobType(`other-${table}`));
			await write(jobId, named.type);
			expect(
				(await failure(`DELETE FROM job_type WHERE id = $1`, [named.type]))?.[1]
			).toMatch(new RegExp(`job_type \\d+ is still named by ${table}\\.job_type_id`));
		}
	});

	it("refuses to delete a workspace a file names, and a strike an ingest names", async () => {
		const { id: ws } = await one<{ id: number }>(
			`INSERT INTO workspace (name, title, json_config) VALUES ('named', 'named', '{}')
			 RETURNING id`
		);
		await query(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, uuid)
			 VALUES ('SOURCE', $1, 'f', 'f', 'text/plain', 'u')`,
			[ws]
		);
		expect((await failure(`DELETE FROM workspace WHERE id = $1`, [ws]))?.[1]).toMatch(
			/workspace \d+ is still named by scale_file\.workspace_id/
		);
		const { id: strike } = await one<{ id: number }>(
			`INSERT INTO strike (name, configuration) VALUES ('s', '{}') RETURNING id`
		);
		await query(
			`INSERT INTO ingest (file_name, strike_id, status) VALUES ('f', $1, 'DEFERRED')`,
			[strike]
		);
		expect((await failure(`DELETE FROM strike WHERE id = $1`, [strike]))?.[0]).toBe("23503");
	});

	it("waits for a transaction writing a reference, then refuses", async () => {
		const racing = await jobType("racing");
		const { id: eventId } = await one<{ id: number }>(
			`INSERT INTO trigger_event (type, description) VALUES ('USER', '{}') RETURNING id`
		);
		const writer = await test.db.transaction();
		try {
			await test.db.query(
				`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority,
					num_exes, timeout, max_tries, data)
				 VALUES ($1, $2, $3, 'PENDING', 100, 0, 60, 1, '{}')`,
				{ bind: [racing.type, racing.rev, eventId], transaction: writer }
			);
			// the delete's guard waits for the writer's lock on job
			let settled = false;
			const deleting = failure(`DELETE FROM job_type WHERE id = $1`, [racing.type]).then(
				result => {
					settled = true;
					return result;
				}
			);
			await new Promise(resolve => setTimeout(resolve, 300));
			expect(settled).toBe(false);
			await writer.commit();
			expect((await deleting)?.[1]).toMatch(
				/job_type \d+ is still named by job\.job_type_id/
			);
		} catch (error) {
			if (!(writer as any).finished) await writer.rollback();
			throw error;
		}
	});

	it("leaves the events of a deleted trigger rule without one", async () => {
		const { id: rule } = await one<{ id: number }>(
			`INSERT INTO trigger_rule (type, name, configuration) VALUES ('INGEST', 'r', '{}')
			 RETURNING id`
		);
		const eventId = await event(rule);
		await query(`DELETE FROM trigger_rule WHERE id = $1`, [rule]);
		expect(await one(`SELECT rule_id FROM trigger_event WHERE id = $1`, [eventId])).toEqual({
			rule_id: null
		});
	});

	it("down puts the foreign keys back, up takes them away again", async () => {
		const context = { context: test.db.getQueryInterface() as QueryInterface } as any;
		const count = async () =>
			(
				await one<{ n: number }>(
					`SELECT count(*)::int AS n FROM pg_constraint
					 WHERE contype = 'f' AND conname = ANY($1::text[])`,
					[GUARDED_REFERENCES.map(r => r[3])]
				)
			).n;
		// 0022's guards use 0021's function: down in reverse order, up in order
		await writtenTogether.down(context);
		await down(context);
		expect(await count()).toBe(GUARDED_REFERENCES.length);
		await up(context);
		await writtenTogether.up(context);
		expect(await count()).toBe(0);
	});
});
