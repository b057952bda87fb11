import type { ServiceSchema } from "moleculer";

/** Loads the schemas of the named services (each `services/<name>.service`). */
export function loadServiceSchemas(names: string[]): ServiceSchema[] {
	return names.map(name => {
		const mod = require(`../services/${name}.service`);
		return (mod.default || mod) as ServiceSchema;
	});
}
