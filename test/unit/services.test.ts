import { loadConfig } from "../../lib/config";
import { loadServiceSchemas } from "../../lib/services";

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

	it("leaves the strike mount root unset by default", () => {
		const [ingest] = loadServiceSchemas(loadConfig({ SERVICES: "ingest" }));
		expect(ingest.settings).toMatchObject({ nfsMountRoot: null });
	});
});
