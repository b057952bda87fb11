"use strict";
/**
 * The layer rule (docs/architecture.md, "Layers"), checked by `npm run lint`: a module imports
 * its own layer and the layers below it only, a domain folder only the domain folders named
 * beside it, and no import circle is allowed, type-only imports included.
 */

/** Bottom-up. `uses`: the domain folders a domain folder may import besides the layers below. */
const BASE = ["lib/errors\\.ts", "lib/paths\\.ts", "lib/validation/", "lib/documents/", "lib/clock/"];
const DOMAIN = {
	jobs: [],
	recipes: ["jobs"],
	executions: ["jobs", "recipes"],
	scheduling: ["executions"],
	queue: ["jobs", "recipes"],
	metrics: [],
	triggers: ["jobs", "recipes", "queue", "metrics"],
	agent: ["storage"],
	ingest: ["jobs", "agent", "storage", "triggers"],
	storage: [],
	port: [],
	http: [],
	observability: [],
	repl: []
};
const domain = name => [`lib/${name}/`];
const LAYERS = [
	{ name: "base", paths: BASE },
	{ name: "db", paths: ["lib/db/"] },
	{ name: "list", paths: ["lib/list/"] },
	{ name: "records", paths: ["lib/records/"] },
	...Object.keys(DOMAIN).map(name => ({ name, paths: domain(name), domain: true })),
	{ name: "broker", paths: ["lib/transport/", "middlewares/", "mixins/", "types/"] },
	{ name: "launch", paths: ["lib/launch/", "lib/cluster/"] },
	{ name: "services", paths: ["services/"] },
	{ name: "bin", paths: ["bin/", "moleculer\\.config\\.ts"] }
];

const regex = paths => `^(${paths.join("|")})`;
const all = LAYERS.flatMap(l => l.paths);

const layerRules = LAYERS.map((layer, i) => {
	const below = LAYERS.slice(0, i).filter(l => !l.domain || !layer.domain);
	const allowed = [
		...layer.paths,
		...below.flatMap(l => l.paths),
		...(layer.domain ? DOMAIN[layer.name].flatMap(domain) : [])
	];
	return {
		name: `layer-${layer.name}`,
		comment: `${layer.name} imports only ${[...new Set(allowed)].join(", ")}`,
		severity: "error",
		from: { path: regex(layer.paths) },
		to: { path: regex(all), pathNot: regex(allowed) }
	};
});

module.exports = {
	forbidden: [
		...layerRules,
		{
			name: "no-circular",
			comment: "an import circle, type-only imports included",
			severity: "error",
			from: {},
			to: { circular: true }
		},
		{
			name: "not-to-unresolvable",
			severity: "error",
			from: {},
			to: { couldNotResolve: true }
		}
	],
	options: {
		doNotFollow: { path: "node_modules" },
		exclude: { path: "^(dist|node_modules|data|coverage)/" },
		tsPreCompilationDeps: true,
		tsConfig: { fileName: "tsconfig.json" },
		moduleSystems: ["cjs", "es6"]
	}
};
