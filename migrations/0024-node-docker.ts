import type { MigrationFn } from "umzug";
import type { QueryInterface } from "sequelize";

/**
 * What a node's Docker engine offers, as its agent reports it at registration and in its
 * heartbeats (NodeDocker, lib/agent/protocol.ts), for the scheduler to place a container job type
 * only where it can run (docs/decisions.md, "Running jobs", "Container jobs go where their image
 * is"):
 *
 * - `docker_engine`: an engine answers on the node; `docker_pull`: the agent pulls the images it
 *   lacks; `docker_privileged`: it runs docker_privileged job types. A node whose agent does not
 *   say has none of them (the defaults).
 * - `docker_images`: the engine's images, normalised (lib/scheduling/images.ts), sorted.
 * - `docker_images_hash`: a digest of that list ('' for none). A heartbeat compares it and writes
 *   the list only when it changed, and the scheduler reads a list only when it does not know its
 *   hash: a node's images are not carried at every heartbeat's write or every pass.
 *
 * No index: the scheduler reads these from the rows of the nodes it reads anyway, and none is
 * indexed, so heartbeats stay HOT updates.
 */
export const up: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		ALTER TABLE node
			ADD COLUMN docker_engine boolean NOT NULL DEFAULT false,
			ADD COLUMN docker_pull boolean NOT NULL DEFAULT false,
			ADD COLUMN docker_privileged boolean NOT NULL DEFAULT false,
			ADD COLUMN docker_images text[] NOT NULL DEFAULT '{}',
			ADD COLUMN docker_images_hash text NOT NULL DEFAULT ''
	`);
};

export const down: MigrationFn<QueryInterface> = async ({ context: qi }) => {
	await qi.sequelize.query(`
		ALTER TABLE node
			DROP COLUMN docker_images_hash,
			DROP COLUMN docker_images,
			DROP COLUMN docker_privileged,
			DROP COLUMN docker_pull,
			DROP COLUMN docker_engine
	`);
};
