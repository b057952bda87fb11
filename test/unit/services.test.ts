import { loadConfig } from "../../lib/launch/config";
import { loadServiceSchemas } from "../../lib/launch/services";

describe("loadServiceSchemas", () => {
	it("hands each service the settings its configuration names", () => {
		const schemas = loadServiceSchemas(
			loadConfig({ SERVICES: "api,ingest,status", PORT: "8123", NFS_MOUNT_ROOT: "/net" })
		);
		const settings = Object.fromEntries(schemas.map(s => [s.name, s.settings]));
		expect(Object.keys(settings)).toEqual(["api", "ingest", "status"]);
		expect(settings.ingest).toMatchObject({ nfsMountRoot: "/net" });
		expect(settings.status).toMatchObject({ apiPort: 8123 });
		expect(settings.api).toMatchObject({ port: 8123 });
	});

	it("hands ingest and workspaces the directories no strike or workspace may use", () => {
		const schemas = loadServiceSchemas(
			loadConfig({
				SERVICES: "ingest,workspaces",
				DATA_DIR: "/srv/scale",
				AGENT_WORK_DIR: "/srv/agent"
			})
		);
		for (const schema of schemas)
			expect(schema.settings).toMatchObject({
				dataDir: "/srv/scale",
				agentWorkDir: "/srv/agent"
			});
	});

	it("leaves the strike mount root unset by default", () => {
		const [ingest] = loadServiceSchemas(loadConfig({ SERVICES: "ingest" }));
		expect(ingest.settings).toMatchObject({ nfsMountRoot: null });
	});

	it.each([
		[{}, true],
		[{ TRANSPORTER: "nats://127.0.0.1:4222" }, false],
		[{ TRANSPORTER: "tls://127.0.0.1:4222" }, true],
		[{ TRANSPORTER: "nats://127.0.0.1:4222", NATS_TLS: "true" }, true]
	])(
		"sends s3 credentials to agents only without a transport or over TLS (%j: %s)",
		(env, sent) => {
			const schemas = loadServiceSchemas(
				loadConfig({ SERVICES: "scheduler,ingest", DATABASE_URL: "postgres://x/y", ...env })
			);
			for (const schema of schemas)
				expect(schema.settings).toMatchObject({ s3CredentialsToAgents: sent });
		}
	);

	it("has an agent claim the API's port only where its process serves the API", () => {
		const [alone] = loadServiceSchemas(
			loadConfig({
				SERVICES: "node-agent",
				PORT: "8123",
				TRANSPORTER: "nats://127.0.0.1:4222"
			})
		);
		expect(alone.settings).toMatchObject({ port: 0 });
		const withApi = loadServiceSchemas(
			loadConfig({ SERVICES: "api,node-agent", PORT: "8123" })
		);
		expect(withApi.find(s => s.name === "node-agent")!.settings).toMatchObject({ port: 8123 });
	});
});
