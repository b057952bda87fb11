import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * The whole remaining data model (see docs/data-model.md). Every id is a 32-bit `serial`, so
 * node-postgres hands ids back as JS numbers; `bigint` columns (file sizes, bytes) come back as
 * strings unless the int8 type parser is changed. Nothing here maintains `last_modified` on
 * UPDATE: every UPDATE sets `last_modified = now()` itself, as for the 0001 tables.
 * The statements run in one transaction, so a failure leaves no half-built schema behind.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });

		// ---- nodes --------------------------------------------------------------------------
		await sql(`
			CREATE TABLE node (
				id serial PRIMARY KEY,
				hostname varchar(250) NOT NULL,
				port integer NOT NULL DEFAULT 0,
				slave_id varchar(250) NOT NULL UNIQUE,
				agent_id varchar(250),
				pause_reason varchar(250),
				is_paused boolean NOT NULL DEFAULT false,
				is_paused_errors boolean NOT NULL DEFAULT false,
				is_active boolean NOT NULL DEFAULT true,
				cpus_total double precision,
				mem_total double precision,
				disk_total double precision,
				last_offer timestamptz,
				last_heartbeat timestamptz,
				created timestamptz NOT NULL DEFAULT now(),
				archived timestamptz,
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`CREATE INDEX node_hostname_idx ON node (hostname)`);
		await sql(`CREATE INDEX node_agent_id_idx ON node (agent_id) WHERE agent_id IS NOT NULL`);
		await sql(`CREATE INDEX node_is_active_idx ON node (is_active)`);

		// ---- triggers -----------------------------------------------------------------------
		await sql(`
			CREATE TABLE trigger_rule (
				id serial PRIMARY KEY,
				type varchar(50) NOT NULL,
				name varchar(50) NOT NULL DEFAULT '',
				is_active boolean NOT NULL DEFAULT true,
				configuration jsonb NOT NULL,
				created timestamptz NOT NULL DEFAULT now(),
				archived timestamptz,
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`CREATE INDEX trigger_rule_type_active_idx ON trigger_rule (type, is_active)`);

		await sql(`
			CREATE TABLE trigger_event (
				id serial PRIMARY KEY,
				type varchar(50) NOT NULL,
				rule_id integer REFERENCES trigger_rule (id) ON DELETE SET NULL,
				description jsonb NOT NULL DEFAULT '{}',
				occurred timestamptz NOT NULL DEFAULT now(),
				processed timestamptz
			)`);
		await sql(`CREATE INDEX trigger_event_type_occurred_idx ON trigger_event (type, occurred)`);
		await sql(`CREATE INDEX trigger_event_rule_id_idx ON trigger_event (rule_id)`);
		await sql(
			`CREATE INDEX trigger_event_unprocessed_idx ON trigger_event (id) WHERE processed IS NULL`
		);

		// ---- job types and recipe types -----------------------------------------------------
		await sql(`
			CREATE TABLE job_type (
				id serial PRIMARY KEY,
				name varchar(50) NOT NULL,
				version varchar(50) NOT NULL,
				title varchar(50),
				description text,
				category varchar(50),
				author_name varchar(50),
				author_url text,
				is_system boolean NOT NULL DEFAULT false,
				is_long_running boolean NOT NULL DEFAULT false,
				is_active boolean NOT NULL DEFAULT true,
				is_operational boolean NOT NULL DEFAULT true,
				is_paused boolean NOT NULL DEFAULT false,
				icon_code varchar(20),
				uses_docker boolean NOT NULL DEFAULT false,
				docker_privileged boolean NOT NULL DEFAULT false,
				docker_image varchar(500),
				interface jsonb NOT NULL,
				error_mapping jsonb NOT NULL DEFAULT '{"version": "1.0", "exit_codes": {}}',
				revision_num integer NOT NULL DEFAULT 1 CHECK (revision_num >= 1),
				trigger_rule_id integer REFERENCES trigger_rule (id) ON DELETE SET NULL,
				priority integer NOT NULL DEFAULT 100,
				timeout integer NOT NULL DEFAULT 1800 CHECK (timeout >= 0),
				max_scheduled integer CHECK (max_scheduled >= 0),
				max_tries integer NOT NULL DEFAULT 3 CHECK (max_tries >= 1),
				cpus_required double precision NOT NULL DEFAULT 1.0 CHECK (cpus_required >= 0),
				mem_required double precision NOT NULL DEFAULT 64.0 CHECK (mem_required >= 0),
				disk_out_const_required double precision NOT NULL DEFAULT 64.0
					CHECK (disk_out_const_required >= 0),
				disk_out_mult_required double precision NOT NULL DEFAULT 0.0
					CHECK (disk_out_mult_required >= 0),
				created timestamptz NOT NULL DEFAULT now(),
				archived timestamptz,
				paused timestamptz,
				last_modified timestamptz NOT NULL DEFAULT now(),
				UNIQUE (name, version)
			)`);
		await sql(`CREATE INDEX job_type_category_idx ON job_type (category)`);
		await sql(`CREATE INDEX job_type_trigger_rule_id_idx ON job_type (trigger_rule_id)`);
		await sql(`CREATE INDEX job_type_last_modified_idx ON job_type (last_modified)`);

		await sql(`
			CREATE TABLE job_type_rev (
				id serial PRIMARY KEY,
				job_type_id integer NOT NULL REFERENCES job_type (id) ON DELETE CASCADE,
				revision_num integer NOT NULL CHECK (revision_num >= 1),
				interface jsonb NOT NULL,
				created timestamptz NOT NULL DEFAULT now(),
				UNIQUE (job_type_id, revision_num)
			)`);

		await sql(`
			CREATE TABLE recipe_type (
				id serial PRIMARY KEY,
				name varchar(50) NOT NULL,
				version varchar(50) NOT NULL,
				title varchar(50),
				description varchar(500),
				is_active boolean NOT NULL DEFAULT true,
				definition jsonb NOT NULL,
				revision_num integer NOT NULL DEFAULT 1 CHECK (revision_num >= 1),
				trigger_rule_id integer REFERENCES trigger_rule (id) ON DELETE SET NULL,
				created timestamptz NOT NULL DEFAULT now(),
				archived timestamptz,
				last_modified timestamptz NOT NULL DEFAULT now(),
				UNIQUE (name, version)
			)`);
		await sql(`CREATE INDEX recipe_type_trigger_rule_id_idx ON recipe_type (trigger_rule_id)`);
		await sql(`CREATE INDEX recipe_type_last_modified_idx ON recipe_type (last_modified)`);

		await sql(`
			CREATE TABLE recipe_type_rev (
				id serial PRIMARY KEY,
				recipe_type_id integer NOT NULL REFERENCES recipe_type (id) ON DELETE CASCADE,
				revision_num integer NOT NULL CHECK (revision_num >= 1),
				definition jsonb NOT NULL,
				created timestamptz NOT NULL DEFAULT now(),
				UNIQUE (recipe_type_id, revision_num)
			)`);

		// ---- jobs and executions ------------------------------------------------------------
		await sql(`
			CREATE TABLE job (
				id serial PRIMARY KEY,
				job_type_id integer NOT NULL REFERENCES job_type (id) ON DELETE RESTRICT,
				job_type_rev_id integer NOT NULL REFERENCES job_type_rev (id) ON DELETE RESTRICT,
				event_id integer NOT NULL REFERENCES trigger_event (id) ON DELETE RESTRICT,
				error_id integer REFERENCES error (id) ON DELETE RESTRICT,
				status varchar(50) NOT NULL DEFAULT 'PENDING' CHECK (status IN
					('PENDING', 'BLOCKED', 'QUEUED', 'RUNNING', 'FAILED', 'COMPLETED', 'CANCELED')),
				priority integer NOT NULL,
				num_exes integer NOT NULL DEFAULT 0 CHECK (num_exes >= 0),
				timeout integer NOT NULL CHECK (timeout >= 0),
				max_tries integer NOT NULL CHECK (max_tries >= 1),
				cpus_required double precision,
				mem_required double precision,
				disk_in_required double precision,
				disk_out_required double precision,
				data jsonb NOT NULL,
				results jsonb,
				created timestamptz NOT NULL DEFAULT now(),
				queued timestamptz,
				started timestamptz,
				ended timestamptz,
				last_status_change timestamptz,
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`CREATE INDEX job_status_last_modified_idx ON job (status, last_modified)`);
		await sql(
			`CREATE INDEX job_job_type_id_last_modified_idx ON job (job_type_id, last_modified)`
		);
		await sql(`CREATE INDEX job_last_modified_idx ON job (last_modified)`);
		await sql(`CREATE INDEX job_created_idx ON job (created)`);
		await sql(`CREATE INDEX job_last_status_change_idx ON job (last_status_change)`);
		await sql(
			`CREATE INDEX job_unfinished_job_type_id_idx ON job (job_type_id, status)
			 WHERE status IN ('PENDING', 'BLOCKED', 'QUEUED', 'RUNNING')`
		);

		await sql(`
			CREATE TABLE job_exe (
				id serial PRIMARY KEY,
				job_id integer NOT NULL REFERENCES job (id) ON DELETE CASCADE,
				status varchar(50) NOT NULL DEFAULT 'QUEUED'
					CHECK (status IN ('QUEUED', 'RUNNING', 'FAILED', 'COMPLETED', 'CANCELED')),
				error_id integer REFERENCES error (id) ON DELETE RESTRICT,
				command_arguments text,
				timeout integer NOT NULL CHECK (timeout >= 0),
				node_id integer REFERENCES node (id) ON DELETE RESTRICT,
				agent_id varchar(250),
				environment jsonb,
				cpus_scheduled double precision,
				mem_scheduled double precision,
				disk_in_scheduled double precision,
				disk_out_scheduled double precision,
				disk_total_scheduled double precision,
				pre_started timestamptz,
				pre_completed timestamptz,
				pre_exit_code integer,
				job_started timestamptz,
				job_completed timestamptz,
				job_exit_code integer,
				post_started timestamptz,
				post_completed timestamptz,
				post_exit_code integer,
				results jsonb,
				results_manifest jsonb,
				created timestamptz NOT NULL DEFAULT now(),
				queued timestamptz NOT NULL DEFAULT now(),
				started timestamptz,
				ended timestamptz,
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(
			`CREATE INDEX job_exe_status_last_modified_idx ON job_exe (status, last_modified)`
		);
		await sql(`CREATE INDEX job_exe_job_id_idx ON job_exe (job_id)`);
		await sql(
			`CREATE INDEX job_exe_node_id_last_modified_idx ON job_exe (node_id, last_modified)`
		);
		await sql(`CREATE INDEX job_exe_last_modified_idx ON job_exe (last_modified)`);
		await sql(
			`CREATE INDEX job_exe_running_node_id_idx ON job_exe (node_id) WHERE status = 'RUNNING'`
		);
		await sql(
			`CREATE INDEX job_exe_running_agent_id_idx ON job_exe (agent_id) WHERE status = 'RUNNING'`
		);
		await sql(
			`CREATE UNIQUE INDEX job_exe_one_live_per_job_idx ON job_exe (job_id)
			 WHERE status IN ('QUEUED', 'RUNNING')`
		);

		await sql(`
			CREATE TABLE job_exe_log (
				job_exe_id integer PRIMARY KEY REFERENCES job_exe (id) ON DELETE CASCADE,
				stdout text,
				stderr text,
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);

		await sql(`
			CREATE TABLE queue (
				id serial PRIMARY KEY,
				job_exe_id integer NOT NULL UNIQUE REFERENCES job_exe (id) ON DELETE CASCADE,
				job_id integer NOT NULL REFERENCES job (id) ON DELETE CASCADE,
				job_type_id integer NOT NULL REFERENCES job_type (id) ON DELETE CASCADE,
				priority integer NOT NULL,
				cpus_required double precision NOT NULL,
				mem_required double precision NOT NULL,
				disk_in_required double precision NOT NULL,
				disk_out_required double precision NOT NULL,
				disk_total_required double precision NOT NULL,
				queued timestamptz NOT NULL DEFAULT now(),
				created timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`CREATE INDEX queue_claim_idx ON queue (priority, queued, id)`);
		await sql(`CREATE INDEX queue_job_id_idx ON queue (job_id)`);
		await sql(`CREATE INDEX queue_job_type_id_idx ON queue (job_type_id)`);

		// ---- recipes ------------------------------------------------------------------------
		await sql(`
			CREATE TABLE recipe (
				id serial PRIMARY KEY,
				recipe_type_id integer NOT NULL REFERENCES recipe_type (id) ON DELETE RESTRICT,
				recipe_type_rev_id integer NOT NULL REFERENCES recipe_type_rev (id) ON DELETE RESTRICT,
				event_id integer NOT NULL REFERENCES trigger_event (id) ON DELETE RESTRICT,
				data jsonb NOT NULL,
				completed timestamptz,
				created timestamptz NOT NULL DEFAULT now(),
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(
			`CREATE INDEX recipe_recipe_type_id_last_modified_idx ON recipe (recipe_type_id, last_modified)`
		);
		await sql(`CREATE INDEX recipe_last_modified_idx ON recipe (last_modified)`);
		await sql(`CREATE INDEX recipe_created_idx ON recipe (created)`);

		await sql(`
			CREATE TABLE recipe_job (
				recipe_id integer NOT NULL REFERENCES recipe (id) ON DELETE CASCADE,
				job_name varchar(100) NOT NULL,
				job_id integer NOT NULL UNIQUE REFERENCES job (id) ON DELETE RESTRICT,
				PRIMARY KEY (recipe_id, job_name)
			)`);

		// ---- files (source files and products in one table) ---------------------------------
		await sql(`
			CREATE TABLE scale_file (
				id serial PRIMARY KEY,
				file_type varchar(50) NOT NULL CHECK (file_type IN ('SOURCE', 'PRODUCT')),
				workspace_id integer NOT NULL REFERENCES workspace (id) ON DELETE RESTRICT,
				file_name varchar(250) NOT NULL,
				file_path varchar(1000) NOT NULL,
				media_type varchar(250) NOT NULL,
				file_size bigint NOT NULL DEFAULT 0 CHECK (file_size >= 0),
				data_type text[] NOT NULL DEFAULT '{}',
				is_deleted boolean NOT NULL DEFAULT false,
				deleted timestamptz,
				uuid varchar(32) NOT NULL,
				data_started timestamptz,
				data_ended timestamptz,
				geometry text,
				center_point text,
				meta_data jsonb NOT NULL DEFAULT '{}',
				countries text[] NOT NULL DEFAULT '{}',
				is_parsed boolean NOT NULL DEFAULT false,
				parsed timestamptz,
				job_type_id integer REFERENCES job_type (id) ON DELETE RESTRICT,
				job_id integer REFERENCES job (id) ON DELETE RESTRICT,
				job_exe_id integer REFERENCES job_exe (id) ON DELETE RESTRICT,
				is_operational boolean NOT NULL DEFAULT true,
				has_been_published boolean NOT NULL DEFAULT false,
				is_published boolean NOT NULL DEFAULT false,
				published timestamptz,
				unpublished timestamptz,
				is_superseded boolean NOT NULL DEFAULT false,
				superseded timestamptz,
				created timestamptz NOT NULL DEFAULT now(),
				last_modified timestamptz NOT NULL DEFAULT now(),
				CHECK (file_type = 'SOURCE'
					OR (job_type_id IS NOT NULL AND job_id IS NOT NULL AND job_exe_id IS NOT NULL))
			)`);
		await sql(
			`CREATE INDEX scale_file_type_last_modified_idx ON scale_file (file_type, last_modified)`
		);
		await sql(`CREATE INDEX scale_file_file_name_idx ON scale_file (file_name)`);
		await sql(
			`CREATE UNIQUE INDEX scale_file_source_file_name_idx ON scale_file (file_name)
			 WHERE file_type = 'SOURCE'`
		);
		await sql(`CREATE INDEX scale_file_workspace_id_idx ON scale_file (workspace_id)`);
		await sql(`CREATE INDEX scale_file_uuid_idx ON scale_file (uuid)`);
		await sql(`CREATE INDEX scale_file_data_started_idx ON scale_file (data_started)`);
		await sql(
			`CREATE INDEX scale_file_source_is_parsed_idx ON scale_file (is_parsed, last_modified)
			 WHERE file_type = 'SOURCE'`
		);
		await sql(
			`CREATE INDEX scale_file_job_type_id_idx ON scale_file (job_type_id, last_modified)
			 WHERE job_type_id IS NOT NULL`
		);
		await sql(
			`CREATE INDEX scale_file_job_id_idx ON scale_file (job_id) WHERE job_id IS NOT NULL`
		);
		await sql(
			`CREATE INDEX scale_file_job_exe_id_idx ON scale_file (job_exe_id) WHERE job_exe_id IS NOT NULL`
		);

		await sql(`
			CREATE TABLE file_ancestry_link (
				id serial PRIMARY KEY,
				ancestor_id integer NOT NULL REFERENCES scale_file (id) ON DELETE CASCADE,
				descendant_id integer REFERENCES scale_file (id) ON DELETE CASCADE,
				job_id integer NOT NULL REFERENCES job (id) ON DELETE CASCADE,
				job_exe_id integer NOT NULL REFERENCES job_exe (id) ON DELETE CASCADE,
				recipe_id integer REFERENCES recipe (id) ON DELETE SET NULL,
				ancestor_job_id integer REFERENCES job (id) ON DELETE SET NULL,
				ancestor_job_exe_id integer REFERENCES job_exe (id) ON DELETE SET NULL,
				created timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(
			`CREATE INDEX file_ancestry_link_ancestor_id_idx ON file_ancestry_link (ancestor_id)`
		);
		await sql(
			`CREATE INDEX file_ancestry_link_descendant_id_idx ON file_ancestry_link (descendant_id)
			 WHERE descendant_id IS NOT NULL`
		);
		await sql(`CREATE INDEX file_ancestry_link_job_id_idx ON file_ancestry_link (job_id)`);
		await sql(
			`CREATE INDEX file_ancestry_link_job_exe_id_idx ON file_ancestry_link (job_exe_id)`
		);
		await sql(
			`CREATE INDEX file_ancestry_link_recipe_id_idx ON file_ancestry_link (recipe_id)
			 WHERE recipe_id IS NOT NULL`
		);
		await sql(
			`CREATE INDEX file_ancestry_link_ancestor_job_id_idx ON file_ancestry_link (ancestor_job_id)
			 WHERE ancestor_job_id IS NOT NULL`
		);
		await sql(
			`CREATE INDEX file_ancestry_link_ancestor_job_exe_id_idx
			 ON file_ancestry_link (ancestor_job_exe_id) WHERE ancestor_job_exe_id IS NOT NULL`
		);

		// ---- ingest -------------------------------------------------------------------------
		await sql(`
			CREATE TABLE strike (
				id serial PRIMARY KEY,
				name varchar(50) NOT NULL UNIQUE,
				title varchar(50),
				description varchar(500),
				configuration jsonb NOT NULL,
				job_id integer REFERENCES job (id) ON DELETE SET NULL,
				created timestamptz NOT NULL DEFAULT now(),
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);

		await sql(`
			CREATE TABLE ingest (
				id serial PRIMARY KEY,
				file_name varchar(250) NOT NULL,
				strike_id integer NOT NULL REFERENCES strike (id) ON DELETE RESTRICT,
				job_id integer REFERENCES job (id) ON DELETE SET NULL,
				status varchar(50) NOT NULL DEFAULT 'TRANSFERRING' CHECK (status IN ('TRANSFERRING',
					'TRANSFERRED', 'DEFERRED', 'INGESTING', 'INGESTED', 'ERRORED', 'DUPLICATE')),
				transfer_path varchar(1000),
				bytes_transferred bigint NOT NULL DEFAULT 0,
				transfer_started timestamptz,
				transfer_ended timestamptz,
				media_type varchar(250),
				file_size bigint,
				data_type text[] NOT NULL DEFAULT '{}',
				file_path varchar(1000),
				workspace_id integer REFERENCES workspace (id) ON DELETE RESTRICT,
				new_workspace_id integer REFERENCES workspace (id) ON DELETE RESTRICT,
				ingest_path varchar(1000),
				ingest_started timestamptz,
				ingest_ended timestamptz,
				source_file_id integer REFERENCES scale_file (id) ON DELETE SET NULL,
				created timestamptz NOT NULL DEFAULT now(),
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`CREATE INDEX ingest_status_last_modified_idx ON ingest (status, last_modified)`);
		await sql(`CREATE INDEX ingest_status_ingest_ended_idx ON ingest (status, ingest_ended)`);
		await sql(`CREATE INDEX ingest_strike_id_idx ON ingest (strike_id)`);
		await sql(`CREATE INDEX ingest_file_name_idx ON ingest (file_name)`);
		await sql(`CREATE INDEX ingest_last_modified_idx ON ingest (last_modified)`);
		await sql(
			`CREATE INDEX ingest_source_file_id_idx ON ingest (source_file_id)
			 WHERE source_file_id IS NOT NULL`
		);

		// ---- queue load and daily metrics ---------------------------------------------------
		await sql(`
			CREATE TABLE job_load (
				id serial PRIMARY KEY,
				measured timestamptz NOT NULL,
				job_type_id integer REFERENCES job_type (id) ON DELETE CASCADE,
				pending_count integer NOT NULL DEFAULT 0,
				queued_count integer NOT NULL DEFAULT 0,
				running_count integer NOT NULL DEFAULT 0,
				total_count integer NOT NULL DEFAULT 0
			)`);
		await sql(`CREATE INDEX job_load_measured_idx ON job_load (measured)`);
		await sql(
			`CREATE INDEX job_load_job_type_id_measured_idx ON job_load (job_type_id, measured)`
		);

		await sql(`
			CREATE TABLE metrics_error (
				id serial PRIMARY KEY,
				error_id integer NOT NULL REFERENCES error (id) ON DELETE CASCADE,
				occurred date NOT NULL,
				total_count integer,
				created timestamptz NOT NULL DEFAULT now(),
				UNIQUE (occurred, error_id)
			)`);

		await sql(`
			CREATE TABLE metrics_ingest (
				id serial PRIMARY KEY,
				strike_id integer NOT NULL REFERENCES strike (id) ON DELETE CASCADE,
				occurred date NOT NULL,
				deferred_count integer,
				ingested_count integer,
				errored_count integer,
				duplicate_count integer,
				total_count integer,
				file_size_sum bigint,
				file_size_min bigint,
				file_size_max bigint,
				file_size_avg bigint,
				transfer_time_sum integer,
				transfer_time_min integer,
				transfer_time_max integer,
				transfer_time_avg integer,
				ingest_time_sum integer,
				ingest_time_min integer,
				ingest_time_max integer,
				ingest_time_avg integer,
				created timestamptz NOT NULL DEFAULT now(),
				UNIQUE (occurred, strike_id)
			)`);

		await sql(`
			CREATE TABLE metrics_job_type (
				id serial PRIMARY KEY,
				job_type_id integer NOT NULL REFERENCES job_type (id) ON DELETE CASCADE,
				occurred date NOT NULL,
				completed_count integer,
				failed_count integer,
				canceled_count integer,
				total_count integer,
				error_system_count integer,
				error_data_count integer,
				error_algorithm_count integer,
				queue_time_sum integer,
				queue_time_min integer,
				queue_time_max integer,
				queue_time_avg integer,
				pre_time_sum integer,
				pre_time_min integer,
				pre_time_max integer,
				pre_time_avg integer,
				job_time_sum integer,
				job_time_min integer,
				job_time_max integer,
				job_time_avg integer,
				post_time_sum integer,
				post_time_min integer,
				post_time_max integer,
				post_time_avg integer,
				run_time_sum integer,
				run_time_min integer,
				run_time_max integer,
				run_time_avg integer,
				stage_time_sum integer,
				stage_time_min integer,
				stage_time_max integer,
				stage_time_avg integer,
				created timestamptz NOT NULL DEFAULT now(),
				UNIQUE (occurred, job_type_id)
			)`);

		// ---- cluster-wide settings and clock state ------------------------------------------
		await sql(`
			CREATE TABLE scheduler (
				id integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
				is_paused boolean NOT NULL DEFAULT false,
				num_message_handlers integer NOT NULL DEFAULT 1 CHECK (num_message_handlers >= 0),
				system_logging_level varchar(10) NOT NULL DEFAULT 'INFO'
					CHECK (system_logging_level IN ('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')),
				node_error_period integer NOT NULL DEFAULT 1 CHECK (node_error_period >= 1),
				max_node_errors double precision NOT NULL DEFAULT 50.0,
				created timestamptz NOT NULL DEFAULT now(),
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
		await sql(`INSERT INTO scheduler (id, is_paused) VALUES (1, false)`);

		await sql(`
			CREATE TABLE clock_state (
				id serial PRIMARY KEY,
				event_type varchar(50) NOT NULL UNIQUE,
				last_event_id integer REFERENCES trigger_event (id) ON DELETE SET NULL,
				last_occurred timestamptz NOT NULL,
				created timestamptz NOT NULL DEFAULT now(),
				last_modified timestamptz NOT NULL DEFAULT now()
			)`);
	});
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.transaction(async transaction => {
		const sql = (text: string) => qi.sequelize.query(text, { transaction });
		await sql(`DROP TABLE clock_state`);
		await sql(`DROP TABLE scheduler`);
		await sql(`DROP TABLE metrics_job_type`);
		await sql(`DROP TABLE metrics_ingest`);
		await sql(`DROP TABLE metrics_error`);
		await sql(`DROP TABLE job_load`);
		await sql(`DROP TABLE ingest`);
		await sql(`DROP TABLE strike`);
		await sql(`DROP TABLE file_ancestry_link`);
		await sql(`DROP TABLE scale_file`);
		await sql(`DROP TABLE recipe_job`);
		await sql(`DROP TABLE recipe`);
		await sql(`DROP TABLE queue`);
		await sql(`DROP TABLE job_exe_log`);
		await sql(`DROP TABLE job_exe`);
		await sql(`DROP TABLE job`);
		await sql(`DROP TABLE recipe_type_rev`);
		await sql(`DROP TABLE recipe_type`);
		await sql(`DROP TABLE job_type_rev`);
		await sql(`DROP TABLE job_type`);
		await sql(`DROP TABLE trigger_event`);
		await sql(`DROP TABLE trigger_rule`);
		await sql(`DROP TABLE node`);
	});
};
