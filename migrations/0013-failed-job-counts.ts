import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * FAILED jobs counted by job type and error, with their first and last `last_status_change`, kept
 * up to date for GET /job-types/system-failures/ (lib/models/job-type-reports.ts), which grouped
 * ~20,000 index entries of P4's seed at every request (~5 ms of PostgreSQL).
 *
 * A job that becomes FAILED (or stops being, or changes type, error or time while FAILED) adds a
 * row of +1 or -1 with its time to `failed_job_delta`: inserts only, so failing jobs never wait
 * for one another on a shared counter row (nor deadlock on two). A group is its
 * `failed_job_count` row plus its deltas, exact at the reader's snapshot: counts add, an added
 * time widens first/last, and a group with a removal reads its first and last off the FAILED
 * jobs' index. Readers and the clock fold the deltas in (one at a time). The triggers' WHEN
 * clauses keep every other update of a job free of them.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	// One statement list, one implicit transaction: the triggers' lock on `job` (taken first)
	// holds every writer back until the counts are taken and committed, so none is missed.
	await qi.sequelize.query(`
		CREATE TABLE failed_job_count (
			job_type_id integer NOT NULL,
			error_id integer NOT NULL,
			count integer NOT NULL,
			first_error timestamptz,
			last_error timestamptz,
			PRIMARY KEY (error_id, job_type_id)
		);
		CREATE TABLE failed_job_delta (
			id bigserial PRIMARY KEY,
			job_type_id integer NOT NULL,
			error_id integer NOT NULL,
			delta integer NOT NULL,
			at timestamptz
		);
		CREATE INDEX failed_job_delta_error_idx ON failed_job_delta (error_id);
		CREATE FUNCTION failed_job_delta() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP <> 'INSERT' AND OLD.status = 'FAILED' AND OLD.error_id IS NOT NULL THEN
				INSERT INTO failed_job_delta (job_type_id, error_id, delta, at)
				VALUES (OLD.job_type_id, OLD.error_id, -1, OLD.last_status_change);
			END IF;
			IF TG_OP <> 'DELETE' AND NEW.status = 'FAILED' AND NEW.error_id IS NOT NULL THEN
				INSERT INTO failed_job_delta (job_type_id, error_id, delta, at)
				VALUES (NEW.job_type_id, NEW.error_id, 1, NEW.last_status_change);
			END IF;
			RETURN NULL;
		END $$;
		CREATE TRIGGER job_failed_insert AFTER INSERT ON job
			FOR EACH ROW WHEN (NEW.status = 'FAILED') EXECUTE FUNCTION failed_job_delta();
		CREATE TRIGGER job_failed_update AFTER UPDATE ON job
			FOR EACH ROW WHEN ((OLD.status = 'FAILED' OR NEW.status = 'FAILED') AND (
				OLD.status IS DISTINCT FROM NEW.status OR OLD.error_id IS DISTINCT FROM NEW.error_id
				OR OLD.job_type_id IS DISTINCT FROM NEW.job_type_id
				OR OLD.last_status_change IS DISTINCT FROM NEW.last_status_change))
			EXECUTE FUNCTION failed_job_delta();
		CREATE TRIGGER job_failed_delete AFTER DELETE ON job
			FOR EACH ROW WHEN (OLD.status = 'FAILED') EXECUTE FUNCTION failed_job_delta();
		CREATE FUNCTION failed_job_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			DELETE FROM failed_job_count;
			DELETE FROM failed_job_delta;
			RETURN NULL;
		END $$;
		CREATE TRIGGER job_failed_truncate AFTER TRUNCATE ON job
			FOR EACH STATEMENT EXECUTE FUNCTION failed_job_truncate();
		INSERT INTO failed_job_count (job_type_id, error_id, count, first_error, last_error)
		SELECT job_type_id, error_id, count(*), min(last_status_change), max(last_status_change)
		FROM job
		WHERE status = 'FAILED' AND error_id IS NOT NULL
		GROUP BY job_type_id, error_id;
	`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		DROP TRIGGER job_failed_truncate ON job;
		DROP FUNCTION failed_job_truncate();
		DROP TRIGGER job_failed_delete ON job;
		DROP TRIGGER job_failed_update ON job;
		DROP TRIGGER job_failed_insert ON job;
		DROP FUNCTION failed_job_delta();
		DROP TABLE failed_job_delta;
		DROP TABLE failed_job_count;
	`);
};
