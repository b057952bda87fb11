import type { ServiceSchema } from "moleculer";
import type { Config } from "./config";

/** The directories the ingest and workspaces services confine mounts and workspaces by. */
function ingestSettings(config: Config): Record<string, unknown> {
	return {
		nfsMountRoot: config.nfsMountRoot,
		// one machine: this process sees the directories its agent watches
		checkMounts: config.transporter === null,
		dataDir: config.dataDir,
		agentWorkDir: config.agent.workDir
	};
}

/** Settings each service takes from the configuration. */
function settingsFor(name: string, config: Config): Record<string, unknown> {
	switch (name) {
		case "api":
			return {
				port: config.port,
				ip: config.host,
				apiTokens: config.apiTokens,
				publicUrl: config.publicUrl,
				trustProxy: config.trustProxy
			};
		case "status":
			return { apiPort: config.port };
		case "workspaces":
			return ingestSettings(config);
		case "scheduler":
		case "ingest":
			// a secret leaves the process only over a protected link (docs/decisions.md)
			return {
				...(name === "ingest" ? ingestSettings(config) : {}),
				s3CredentialsToAgents: !config.transporter || Boolean(config.transporter.tls)
			};
		case "node-agent":
			// the port it registers is the API's where this process serves it; an agent alone
			// serves none
			return { agent: config.agent, port: config.services.includes("api") ? config.port : 0 };
		default:
			return {};
	}
}

/** Loads the schemas of the configured services (each `services/<name>.service`), configured. */
export function loadServiceSchemas(config: Config): ServiceSchema[] {
	return config.services.map(name => {
		const mod = require(`../../services/${name}.service`);
		const schema = (mod.default || mod) as ServiceSchema;
		return { ...schema, settings: { ...schema.settings, ...settingsFor(name, config) } };
	});
}
