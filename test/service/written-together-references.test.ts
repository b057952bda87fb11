import type { QueryInterface } from "sequelize";
import {
	down,
	up,
	WRITTEN_TOGETHER
} from "../../migrations/0022-references-between-rows-written-together";
import { createTestDatabase, sqlOn, type TestDatabase } from "../helpers/db";

/**
 * Migration 0022: the references between rows the service writes together (a job's event, an
 * execution's job, a queue row's execution and job, an ingest's source file) are no longer
 * checked per row written, and a delete made by hand still does what their keys did: CASCADE,
 * SET NULL or a refusal (23503).
 */

let test: TestDatabase;

beforeAll(async () => {
	test = await createTestDatabase();
});

afterAll(() => test.drop());

const { query, one, failure } = sqlOn(() => test.db);

async function count(sql: string, bind: unknown[] = []): Promise<number> {
	return (await one<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, bind)).n;
}

let typeIds: { type: number; rev: number };

beforeAll(async () => {
	const { id: type } = await one<{ id: number }>(
		`INSERT INTO job_type (name, version, interface) VALUES ('t', '1.0', '{}') RETURNING id`
	);
	const { id: rev } = await one<{ id: number }>(
		`INSERT INTO job_type_rev (job_type_id, revision_num, interface) VALUES ($1, 1, '{}')
		 RETURNING id`,
		[type]
	);
	typeIds = { type, rev };
});

async function event(): Promise<number> {
	return (
		await one<{ id: number }>(
			`INSERT INTO trigger_event (type, description) VALUES ('USER', '{}') RETURNING id`
		)
	).id;
}

async function job(eventId?: number): Promise<number> {
	return (
		await one<{ id: number }>(
			`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority, num_exes,
				timeout, max_tries, data)
			 VALUES ($1, $2, $3, 'QUEUED', 100, 1, 60, 1, '{}') RETURNING id`,
			[typeIds.type, typeIds.rev, eventId ?? (await event())]
		)
	).id;
}

/** A QUEUED execution of the job with its queue row; answers the execution's id. */
async function queuedExecution(jobId: number): Promise<number> {
	const { id } = await one<{ id: number }>(
		`INSERT INTO job_exe (job_id, job_type_id, status, timeout)
		 VALUES ($1, $2, 'QUEUED', 60) RETURNING id`,
		[jobId, typeIds.type]
	);
	await query(
		`INSERT INTO queue (job_exe_id, job_id, job_type_id, priority, cpus_required,
			mem_required, disk_in_required, disk_out_required, disk_total_required)
		 VALUES ($1, $2, $3, 100, 1, 1, 0, 0, 0)`,
		[id, jobId, typeIds.type]
	);
	return id;
}

describe("references between rows written together (0022)", () => {
	it("has no foreign key left of those it replaced", async () => {
		expect(
			await count(`pg_constraint WHERE contype = 'f' AND conname = ANY($1::text[])`, [
				WRITTEN_TOGETHER.map(r => r[3])
			])
		).toBe(0);
	});

	it("deletes a deleted job's executions, their logs and its queue row", async () => {
		const jobId = await job();
		const exeId = await queuedExecution(jobId);
		await query(`INSERT INTO job_exe_log (job_exe_id, stdout) VALUES ($1, 'out')`, [exeId]);
		const other = await job();
		await queuedExecution(other);

		await query(`DELETE FROM job WHERE id = $1`, [jobId]);
		expect(await count(`job_exe WHERE job_id = $1`, [jobId])).toBe(0);
		expect(await count(`queue WHERE job_id = $1`, [jobId])).toBe(0);
		expect(await count(`job_exe_log WHERE job_exe_id = $1`, [exeId])).toBe(0);
		// another job's rows are untouched
		expect(await count(`job_exe WHERE job_id = $1`, [other])).toBe(1);
		expect(await count(`queue WHERE job_id = $1`, [other])).toBe(1);
	});

	it("deletes a deleted execution's queue row", async () => {
		const jobId = await job();
		const exeId = await queuedExecution(jobId);
		await query(`DELETE FROM job_exe WHERE id = $1`, [exeId]);
		expect(await count(`queue WHERE job_exe_id = $1`, [exeId])).toBe(0);
		expect(await count(`job WHERE id = $1`, [jobId])).toBe(1);
	});

	it("still refuses to delete a job whose execution made a product", async () => {
		const jobId = await job();
		const exeId = await queuedExecution(jobId);
		const { id: ws } = await one<{ id: number }>(
			`INSERT INTO workspace (name, title, json_config) VALUES ('w', 'w', '{}') RETURNING id`
		);
		await query(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type,
				uuid, job_type_id, job_id, job_exe_id)
			 VALUES ('PRODUCT', $1, 'p', 'p', 'text/plain', 'u', $2, $3, $4)`,
			[ws, typeIds.type, jobId, exeId]
		);
		// the product's own key (RESTRICT: 23001) refuses, as it did before 0022
		const refused = await failure(`DELETE FROM job WHERE id = $1`, [jobId]);
		expect(refused?.[0]).toBe("23001");
		expect(refused?.[1]).toMatch(/scale_file_job_id_fkey/);
		expect(await count(`job_exe WHERE id = $1`, [exeId])).toBe(1);
		expect(await count(`queue WHERE job_exe_id = $1`, [exeId])).toBe(1);
	});

	it("refuses to delete an event a job names, and deletes one nothing names", async () => {
		const named = await event();
		await job(named);
		const refused = await failure(`DELETE FROM trigger_event WHERE id = $1`, [named]);
		expect(refused?.[0]).toBe("23503");
		expect(refused?.[1]).toMatch(/trigger_event \d+ is still named by job\.event_id/);
		const unnamed = await event();
		expect(await failure(`DELETE FROM trigger_event WHERE id = $1`, [unnamed])).toBeNull();
		expect(await count(`trigger_event WHERE id = ANY($1::int[])`, [[named, unnamed]])).toBe(1);
	});

	it("leaves the ingest of a deleted source file without one", async () => {
		const { id: ws } = await one<{ id: number }>(
			`INSERT INTO workspace (name, title, json_config) VALUES ('src', 's', '{}') RETURNING id`
		);
		const { id: fileId } = await one<{ id: number }>(
			`INSERT INTO scale_file (file_type, workspace_id, file_name, file_path, media_type, uuid)
			 VALUES ('SOURCE', $1, 's.dat', 's.dat', 'text/plain', 'u') RETURNING id`,
			[ws]
		);
		const { id: strike } = await one<{ id: number }>(
			`INSERT INTO strike (name, configuration) VALUES ('s', '{}') RETURNING id`
		);
		const { id: ingestId } = await one<{ id: number }>(
			`INSERT INTO ingest (file_name, strike_id, status, source_file_id)
			 VALUES ('s.dat', $1, 'INGESTED', $2) RETURNING id`,
			[strike, fileId]
		);
		await query(`DELETE FROM scale_file WHERE id = $1`, [fileId]);
		expect(await one(`SELECT source_file_id FROM ingest WHERE id = $1`, [ingestId])).toEqual({
			source_file_id: null
		});
	});

	it("a job's delete waits for a transaction writing an execution of it, then deletes that too", async () => {
		const jobId = await job();
		const writer = await test.db.transaction();
		try {
			await test.db.query(
				`INSERT INTO job_exe (job_id, job_type_id, status, timeout)
				 VALUES ($1, $2, 'QUEUED', 60)`,
				{ bind: [jobId, typeIds.type], transaction: writer }
			);
			let settled = false;
			const deleting = failure(`DELETE FROM job WHERE id = $1`, [jobId]).then(result => {
				settled = true;
				return result;
			});
			await new Promise(resolve => setTimeout(resolve, 300));
			// the cascade's SHARE lock on job_exe waits for the writer
			expect(settled).toBe(false);
			await writer.commit();
			expect(await deleting).toBeNull();
		} catch (error) {
			if (!(writer as any).finished) await writer.rollback();
			throw error;
		}
		expect(await count(`job_exe WHERE job_id = $1`, [jobId])).toBe(0);
	});

	it("down puts the foreign keys back, up takes them away again", async () => {
		const context = { context: test.db.getQueryInterface() as QueryInterface } as any;
		const keys = () =>
			count(`pg_constraint WHERE contype = 'f' AND conname = ANY($1::text[])`, [
				WRITTEN_TOGETHER.map(r => r[3])
			]);
		await down(context);
		expect(await keys()).toBe(WRITTEN_TOGETHER.length);
		// the keys act again: a job naming no event is refused
		expect(
			(
				await failure(
					`INSERT INTO job (job_type_id, job_type_rev_id, event_id, status, priority,
						num_exes, timeout, max_tries, data)
					 VALUES ($1, $2, 2147483647, 'PENDING', 100, 0, 60, 1, '{}')`,
					[typeIds.type, typeIds.rev]
				)
			)?.[0]
		).toBe("23503");
		await up(context);
		expect(await keys()).toBe(0);
		expect(await count(`pg_trigger WHERE tgname LIKE '%\\_written\\_with'`)).toBe(4);
	});
});
