import type { ServiceSchema } from "moleculer";
import type { Sequelize } from "sequelize";
import { acquireSequelize, releaseSequelize } from "../lib/db/connection";

declare module "moleculer" {
	interface Service {
		db: Sequelize;
	}
}

/**
 * Gives a service `this.db`, the process's shared connection pool to the database named by the
 * broker's `metadata.databaseUrl` (set by bin/start from DATABASE_URL or the embedded server).
 */
export function DbMixin(): Partial<ServiceSchema> {
	return {
		created() {
			const url = this.broker.metadata?.databaseUrl as string | undefined;
			if (!url)
				throw new Error(
					`service ${this.name} needs a database: broker metadata.databaseUrl is unset`
				);
			this.db = acquireSequelize(url);
		},
		async stopped() {
			await releaseSequelize(this.broker.metadata.databaseUrl as string);
		}
	};
}
