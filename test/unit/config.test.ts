import path from "path";
import {
	ALL_SERVICES,
	ConfigError,
	loadConfig,
	natsRoleOf,
	needsDatabase
} from "../../lib/launch/config";

describe("loadConfig", () => {
	it("has defaults for an empty environment", () => {
		const config = loadConfig({});
		expect(config).toEqual({
			databaseUrl: null,
			transporter: null,
			services: [...ALL_SERVICES],
			nodeId: null,
			natsRole: null,
			host: "127.0.0.1",
			port: 8000,
			dataDir: path.resolve("./data"),
			logLevel: "info",
			apiTokens: [],
			allowAnonymous: false,
			publicUrl: null,
			trustProxy: false,
			embeddedPgPort: 54329,
			metricsPort: null,
			metricsHost: "127.0.0.1",
			schedulerThread: false,
			nfsMountRoot: null,
			agent: {
				workDir: path.resolve("./data/agent"),
				cpus: null,
				memMiB: null,
				diskMiB: null,
				launchers: 2,
				launcher: "auto",
				slowLaunchMs: 0,
				taskUser: null,
				taskUids: { first: 1_900_000_000, count: 100_000 },
				docker: {
					host: null,
					pull: false,
					privileged: false,
					network: null,
					imageUser: false
				},
				drainS: 60
			}
		});
		expect(path.isAbsolute(config.dataDir)).toBe(true);
		expect(config.services).toEqual(expect.arrayContaining(["api", "errors", "status"]));
	});

	it("does not read process.env when given an environment", () => {
		const saved = process.env.PORT;
		process.env.PORT = "9999";
		try {
			expect(loadConfig({}).port).toBe(8000);
		} finally {
			if (saved === undefined) delete process.env.PORT;
			else process.env.PORT = saved;
		}
	});

	it("reads every variable", () => {
		const config = loadConfig({
			DATABASE_URL: "postgres://u:p@db:5432/scale",
			TRANSPORTER: "nats://nats:4222",
			SERVICES: "errors",
			NODE_ID: "node-7",
			NATS_ROLE: "control",
			HOST: "127.0.0.2",
			PORT: "8080",
			DATA_DIR: "/var/lib/scale",
			LOG_LEVEL: "DEBUG",
			API_TOKENS: " a , b,,c ",
			ALLOW_ANONYMOUS: "true",
			PUBLIC_URL: "https://scale.example.com:8443/scale/",
			TRUST_PROXY: "yes",
			EMBEDDED_PG_PORT: "5433",
			METRICS_PORT: "9100",
			METRICS_HOST: "0.0.0.0",
			SCHEDULER_THREAD: "on",
			NFS_MOUNT_ROOT: "/net/",
			AGENT_WORK_DIR: "/srv/agent",
			AGENT_CPUS: "1.5",
			AGENT_MEM_MIB: "2048",
			AGENT_DISK_MIB: "10000",
			AGENT_LAUNCHERS: "3",
			AGENT_LAUNCHER: "node",
			BENCH_SLOW_LAUNCH_MS: "4",
			AGENT_TASK_USER: "jobs",
			AGENT_TASK_UIDS: "500000-500999",
			AGENT_DOCKER_HOST: "unix:///run/other.sock",
			AGENT_DOCKER_PULL: "yes",
			AGENT_DOCKER_PRIVILEGED: "true",
			AGENT_DOCKER_NETWORK: "none",
			AGENT_DOCKER_USER: "image",
			AGENT_DRAIN_S: "2.5"
		});
		expect(config).toEqual({
			databaseUrl: "postgres://u:p@db:5432/scale",
			transporter: { servers: ["nats:4222"] },
			services: ["errors"],
			nodeId: "node-7",
			natsRole: "control",
			host: "127.0.0.2",
			port: 8080,
			dataDir: "/var/lib/scale",
			logLevel: "debug",
			apiTokens: ["a", "b", "c"],
			allowAnonymous: true,
			publicUrl: "https://scale.example.com:8443/scale",
			trustProxy: true,
			embeddedPgPort: 5433,
			metricsPort: 9100,
			metricsHost: "0.0.0.0",
			schedulerThread: true,
			nfsMountRoot: "/net",
			agent: {
				workDir: "/srv/agent",
				cpus: 1.5,
				memMiB: 2048,
				diskMiB: 10000,
				launchers: 3,
				launcher: "node",
				slowLaunchMs: 4,
				taskUser: "jobs",
				taskUids: { first: 500000, count: 1000 },
				docker: {
					host: "unix:///run/other.sock",
					pull: true,
					privileged: true,
					network: "none",
					imageUser: true
				},
				drainS: 2.5
			}
		});
	});

	it.each([
		["AGENT_CPUS", "0"],
		["AGENT_MEM_MIB", "-1"],
		["AGENT_DISK_MIB", "lots"],
		["AGENT_LAUNCHERS", "1.5"]
	])("rejects %s=%s naming the variable", (name, value) => {
		expect(() => loadConfig({ [name]: value })).toThrow(
			new RegExp(`^${name} must be a positive`)
		);
	});

	it.each([
		["AGENT_TASK_UIDS", "0-100", "a range"],
		["AGENT_TASK_UIDS", "5000", "a range"],
		["AGENT_TASK_UIDS", "9000-8000", "a range"],
		["AGENT_DOCKER_PULL", "maybe", "true or false"],
		["AGENT_DOCKER_USER", "root", '"task" or "image"'],
		["AGENT_DRAIN_S", "-1", "a number of seconds from 0 to 86400"],
		["AGENT_DRAIN_S", "a minute", "a number of seconds from 0 to 86400"],
		["AGENT_DRAIN_S", "86401", "a number of seconds from 0 to 86400"]
	])("rejects %s=%s, saying what it must be", (name, value, what) => {
		expect(() => loadConfig({ [name]: value })).toThrow(`${name} must be ${what}`);
	});

	it("takes AGENT_DRAIN_S=0: the node's executions are stopped at once", () => {
		expect(loadConfig({ AGENT_DRAIN_S: "0" }).agent.drainS).toBe(0);
		expect(loadConfig({ AGENT_DRAIN_S: " " }).agent.drainS).toBe(60);
	});

	it("rejects a NFS_MOUNT_ROOT that is not an absolute path, naming it", () => {
		expect(() => loadConfig({ NFS_MOUNT_ROOT: "net" })).toThrow(
			/^NFS_MOUNT_ROOT must be an absolute path, got "net"/
		);
	});

	it("rejects a SCHEDULER_THREAD that is not a switch, naming it", () => {
		expect(() => loadConfig({ SCHEDULER_THREAD: "maybe" })).toThrow(
			/^SCHEDULER_THREAD must be true or false/
		);
		expect(loadConfig({ SCHEDULER_THREAD: "0" }).schedulerThread).toBe(false);
	});

	it("rejects an AGENT_LAUNCHER that is not auto, native or node", () => {
		expect(() => loadConfig({ AGENT_LAUNCHER: "c" })).toThrow(
			'AGENT_LAUNCHER must be one of auto, native, node, got "c"'
		);
		expect(loadConfig({ AGENT_LAUNCHER: "native" }).agent.launcher).toBe("native");
	});

	it("resolves a relative DATA_DIR against the working directory", () => {
		expect(loadConfig({ DATA_DIR: "some/dir" }).dataDir).toBe(
			path.join(process.cwd(), "some", "dir")
		);
	});

	describe("SERVICES", () => {
		it("runs a subset, in the order given, spaces trimmed", () => {
			expect(loadConfig({ SERVICES: "status, errors" }).services).toEqual([
				"status",
				"errors"
			]);
			expect(loadConfig({ SERVICES: "api" }).services).toEqual(["api"]);
		});

		it("runs every service for empty or all", () => {
			expect(loadConfig({ SERVICES: "" }).services).toEqual([...ALL_SERVICES]);
			expect(loadConfig({ SERVICES: "all" }).services).toEqual([...ALL_SERVICES]);
			expect(loadConfig({ SERVICES: " , " }).services).toEqual([...ALL_SERVICES]);
		});

		it.each(["nope", "api,nope", "Errors", "errors.service"])(
			"refuses an unknown service in %j with a ConfigError naming it",
			services => {
				expect(() => loadConfig({ SERVICES: services })).toThrow(ConfigError);
				const bad = services.split(",").find(s => !ALL_SERVICES.includes(s as any))!;
				expect(() => loadConfig({ SERVICES: services })).toThrow(
					new RegExp(`SERVICES.*"${bad.replace(".", "\\.")}"`)
				);
			}
		);

		it("knows which processes need a database", () => {
			expect(needsDatabase(loadConfig({ SERVICES: "api" }))).toBe(false);
			expect(needsDatabase(loadConfig({ SERVICES: "api,errors" }))).toBe(true);
			expect(needsDatabase(loadConfig({ SERVICES: "status" }))).toBe(true);
			expect(needsDatabase(loadConfig({}))).toBe(true);
			expect(needsDatabase(loadConfig({ SERVICES: "api,node-agent" }))).toBe(false);
			for (const service of ALL_SERVICES.filter(s => s !== "api" && s !== "node-agent"))
				expect(needsDatabase(loadConfig({ SERVICES: service }))).toBe(true);
		});
	});

	describe("PORT", () => {
		it.each([
			["0", 0],
			["1", 1],
			["65535", 65535],
			["", 8000]
		])("accepts %j", (port, expected) => {
			expect(loadConfig({ PORT: port }).port).toBe(expected);
		});

		it.each(["abc", "-1", "65536", "80.5", "8000x", "NaN"])(
			"refuses %j with a ConfigError naming PORT",
			port => {
				expect(() => loadConfig({ PORT: port })).toThrow(ConfigError);
				expect(() => loadConfig({ PORT: port })).toThrow(/^PORT /);
			}
		);

		it("checks EMBEDDED_PG_PORT the same way", () => {
			expect(() => loadConfig({ EMBEDDED_PG_PORT: "70000" })).toThrow(/^EMBEDDED_PG_PORT /);
		});
	});

	describe("LOG_LEVEL", () => {
		it.each(["fatal", "error", "warn", "info", "debug", "trace", "WARN"])(
			"accepts %j",
			level => {
				expect(loadConfig({ LOG_LEVEL: level }).logLevel).toBe(level.toLowerCase());
			}
		);

		it.each(["verbose", "warning", "silly", "0"])("refuses %j", level => {
			expect(() => loadConfig({ LOG_LEVEL: level })).toThrow(ConfigError);
			expect(() => loadConfig({ LOG_LEVEL: level })).toThrow(/LOG_LEVEL/);
		});
	});

	describe("METRICS_PORT", () => {
		it("is off unless set", () => {
			expect(loadConfig({}).metricsPort).toBeNull();
			expect(loadConfig({ METRICS_PORT: "" }).metricsPort).toBeNull();
		});

		it.each(["http", "-1", "65536", "9100.5"])("refuses %j", port => {
			expect(() => loadConfig({ METRICS_PORT: port })).toThrow(/METRICS_PORT/);
		});
	});

	describe("PUBLIC_URL", () => {
		it.each([
			["https://scale.example.com", "https://scale.example.com"],
			["HTTPS://Scale.Example.COM:443/", "https://scale.example.com"],
			["http://10.0.0.5:8000", "http://10.0.0.5:8000"],
			["http://[::1]:8000/", "http://[::1]:8000"],
			["https://example.com/scale//", "https://example.com/scale"]
		])("takes %j as %j", (raw, url) => {
			expect(loadConfig({ PUBLIC_URL: raw }).publicUrl).toBe(url);
		});

		it.each([
			"javascript://evil.example/",
			"ftp://scale.example.com",
			"scale.example.com",
			"/api",
			"https://user:pass@scale.example.com",
			"https://scale.example.com/?x=1",
			"https://scale.example.com/#top",
			"https://exa mple.com"
		])("refuses %j", raw => {
			expect(() => loadConfig({ PUBLIC_URL: raw })).toThrow(
				/^PUBLIC_URL must be an http or https URL/
			);
		});
	});

	it("refuses a TRUST_PROXY that is not a switch", () => {
		expect(() => loadConfig({ TRUST_PROXY: "proxy" })).toThrow(
			"TRUST_PROXY must be true or false"
		);
	});

	describe("NATS_ROLE", () => {
		it("is the role of the node's NATS identity, or follows from its services", () => {
			expect(natsRoleOf(loadConfig({ NATS_ROLE: "operator" }))).toBe("operator");
			expect(natsRoleOf(loadConfig({ SERVICES: "node-agent" }))).toBe("agent");
			expect(natsRoleOf(loadConfig({ SERVICES: "api,errors" }))).toBe("control");
			expect(natsRoleOf(loadConfig({}))).toBe("control");
		});

		it("refuses an unknown role, and an agent's identity on a control plane's services", () => {
			expect(() => loadConfig({ NATS_ROLE: "admin" })).toThrow(
				'NATS_ROLE must be one of control, agent, operator, got "admin"'
			);
			expect(() =>
				loadConfig({ NATS_ROLE: "agent", SERVICES: "node-agent,scheduler" })
			).toThrow(
				"NATS_ROLE=agent: an agent's NATS identity offers node-agent only, but SERVICES names scheduler"
			);
		});
	});

	describe("TRANSPORTER", () => {
		it("accepts a nats:// URL", () => {
			expect(loadConfig({ TRANSPORTER: "nats://10.0.0.1:4222" }).transporter).toEqual({
				servers: ["10.0.0.1:4222"]
			});
		});

		it.each(["redis://localhost:6379", "localhost:4222", "NATS", "tcp://nats:4222"])(
			"refuses %j",
			transporter => {
				expect(() => loadConfig({ TRANSPORTER: transporter })).toThrow(ConfigError);
				expect(() => loadConfig({ TRANSPORTER: transporter })).toThrow(/TRANSPORTER/);
			}
		);
	});

	describe("HOST and anonymous access", () => {
		it.each(["127.0.0.1", "127.1.2.3", "localhost", "::1"])(
			"allows anonymous access on loopback %j",
			host => {
				const config = loadConfig({ HOST: host });
				expect(config.host).toBe(host);
				expect(config.apiTokens).toEqual([]);
			}
		);

		it.each(["0.0.0.0", "10.1.2.3", "::", "api.example.com"])(
			"refuses non-loopback %j without API_TOKENS",
			host => {
				expect(() => loadConfig({ HOST: host })).toThrow(ConfigError);
				expect(() => loadConfig({ HOST: host })).toThrow(/API_TOKENS/);
				expect(() => loadConfig({ HOST: host, API_TOKENS: " , " })).toThrow(ConfigError);
				expect(() => loadConfig({ HOST: host, ALLOW_ANONYMOUS: "false" })).toThrow(
					ConfigError
				);
			}
		);

		it("allows a non-loopback host with ALLOW_ANONYMOUS=true", () => {
			for (const value of ["true", "TRUE", "1", "yes"]) {
				const config = loadConfig({ HOST: "0.0.0.0", ALLOW_ANONYMOUS: value });
				expect(config.allowAnonymous).toBe(true);
				expect(config.host).toBe("0.0.0.0");
			}
		});

		it("allows a non-loopback host with API_TOKENS", () => {
			const config = loadConfig({ HOST: "0.0.0.0", API_TOKENS: "secret1,secret2" });
			expect(config.apiTokens).toEqual(["secret1", "secret2"]);
			expect(config.allowAnonymous).toBe(false);
		});

		it("does not care about the host of a process without the API", () => {
			expect(loadConfig({ HOST: "0.0.0.0", SERVICES: "errors,status" }).services).toEqual([
				"errors",
				"status"
			]);
		});
	});
});
