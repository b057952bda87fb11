import type { ServiceSchema } from "moleculer";
import type { Sequelize } from "sequelize";
import { acquireSequelize, releaseSequelize } from "../lib/db/connection";
import { databaseUrlOf } from "../lib/db/broker-database";

declare module "moleculer" {
	interface Service {
		db: Sequelize;
	}
}

/**
 * Gives a service `this.db`, the process's shared connection pool to the database named by the
 * broker's DatabaseMiddleware (bin/start gives it DATABASE_URL or the embedded server's URL).
 */
export function DbMixin(): Partial<ServiceSchema> {
	return {
		created() {
			const url = databaseUrlOf(this.broker);
			if (!url)
				throw new Error(
					`service ${this.name} needs a database: the broker was given no database URL`
				);
			this.db = acquireSequelize(url);
		},
		async stopped() {
			await releaseSequelize(databaseUrlOf(this.broker) as string);
		}
	};
}
