import { MetricsMixin, type Metered } from "../mixins/prometheus-gauges.mixin";
import { INGEST_DEFINITIONS, METRICS, TRIGGER_DEFINITIONS } from "../lib/observability/gauges";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import path from "path";
import { DbMixin } from "../mixins/db.mixin";
import { LIST_PARAMS, listAction, listRequest } from "../mixins/list.mixin";
import { monitorSetup, recordArrivals, recordTransferring } from "../lib/ingest/record";
import { recordIngesting, settleIngests } from "../lib/ingest/settle";
import type { ArrivedFile, MonitorCall, Settled, TransferringFile } from "../lib/ingest/protocol";
import {
	createStrike,
	getStrikeDetails,
	parseNewStrike,
	parseStrikeEdit,
	serializeStrikes,
	STRIKE_LIST,
	updateStrike,
	validateStrike
} from "../lib/ingest/strikes";
import {
	getIngestDetails,
	INGEST_LIST,
	serializeIngests,
	type StrikeRow
} from "../lib/records/ingest";
import { getIngestStatus } from "../lib/records/ingest-status";
import { recordS3Objects } from "../lib/ingest/s3-record";
import type { CreatedObject } from "../lib/storage/sqs";
import { parseFileRef } from "../lib/records/scale-file";
import type { ServiceDirectories } from "../lib/documents/confined-mounts";
import { QUERY_SCHEMA } from "../lib/validation/schema";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { bodyParams, readOnlyWarnings, withWarnings } from "../lib/validation/body";
import { ID_SCHEMA } from "../lib/validation/ids";

/**
 * Ingest: strikes (create, list, details, edit, validation), the ingests' list, details and
 * status, and the side of the strikes' monitors that writes (lib/ingest/record.ts, settle.ts):
 * monitors run on node agents, which hold no database credentials, and report here. Recording an ingest also
 * records its INGEST trigger event; the `triggers` service is told after the commit.
 */

const TIME = { type: "string", minLength: 1, maxLength: 40 };
const NAME = { type: "string", minLength: 1, maxLength: 250 };
const SIZE = { type: "integer", minimum: 0 };
const BATCH = 5000;

const monitorParams = (extra: Record<string, unknown> = {}, required: string[] = []) => ({
	type: "object",
	required: ["strikeId", "jobExeId", ...required],
	properties: { strikeId: ID_SCHEMA, jobExeId: ID_SCHEMA, ...extra }
});

const TRANSFERRING_PARAMS = monitorParams(
	{
		files: {
			type: "array",
			maxItems: BATCH,
			items: {
				type: "object",
				required: ["name", "bytes", "started"],
				properties: { name: NAME, bytes: SIZE, started: TIME }
			}
		}
	},
	["files"]
);

const ARRIVED_PARAMS = monitorParams(
	{
		files: {
			type: "array",
			maxItems: BATCH,
			items: {
				type: "object",
				required: ["name", "size", "transferStarted", "transferEnded"],
				properties: { name: NAME, size: SIZE, transferStarted: TIME, transferEnded: TIME }
			}
		}
	},
	["files"]
);

const S3_OBJECTS_PARAMS = monitorParams(
	{
		objects: {
			type: "array",
			maxItems: BATCH,
			items: {
				type: "object",
				required: ["bucket", "key", "size"],
				properties: {
					bucket: { type: "string", minLength: 1, maxLength: 63 },
					key: { type: "string", minLength: 1, maxLength: 1000 },
					size: SIZE,
					etag: { type: ["string", "null"], maxLength: 100 },
					eventTime: { type: ["string", "null"], maxLength: 40 }
				}
			}
		}
	},
	["objects"]
);

const INGESTING_PARAMS = monitorParams(
	{ ingestIds: { type: "array", maxItems: BATCH, items: ID_SCHEMA } },
	["ingestIds"]
);

const SETTLE_PARAMS = monitorParams(
	{
		results: {
			type: "array",
			maxItems: BATCH,
			items: {
				type: "object",
				required: ["ingestId", "status"],
				properties: {
					ingestId: ID_SCHEMA,
					status: {
						type: "string",
						enum: ["INGESTED", "DEFERRED", "DUPLICATE", "ERRORED"]
					},
					size: SIZE,
					reason: { type: "string", maxLength: 2000 }
				}
			}
		}
	},
	["results"]
);

/** Strike bodies are checked by lib/ingest/strikes, which names each field at fault. */
/** A strike's body: its fields, checked by lib/ingest/strikes.ts (as is `configuration`). */
const STRIKE_FIELDS = { title: {}, description: {}, configuration: {} };
/** What a strike's record shows that no body sets. */
const STRIKE_READ_ONLY = ["id", "job", "created", "last_modified"];
const BODY = bodyParams(
	{ type: "object", properties: { name: {}, ...STRIKE_FIELDS } },
	STRIKE_READ_ONLY
);
const EDIT_BODY = bodyParams(
	{ type: "object", required: ["id"], properties: { id: ID_SCHEMA, ...STRIKE_FIELDS } },
	[...STRIKE_READ_ONLY, "name"]
);

type MonitorContext<P> = Context<MonitorCall & P>;

interface Methods {
	createStrike(body: unknown): Promise<number>;
}

interface IngestSettings extends ServiceSettingSchema, ServiceDirectories {
	/** where the nodes mount the NFS exports strikes name without `mount_on` (NFS_MOUNT_ROOT) */
	nfsMountRoot: string | null;
	/**
	 * whether a strike's `mount` must exist here at create: true on one machine, false in a
	 * cluster, where only the agents may see it (its job then fails naming the directory)
	 */
	checkMounts: boolean;
	/** an S3 strike's credentials go to its monitor (no transport, or NATS over TLS: launch) */
	s3CredentialsToAgents: boolean;
}

type IngestThis = Service<IngestSettings> & Methods & Metered;

const IngestService: ServiceSchema<IngestSettings, Methods> = {
	name: "ingest",
	mixins: [DbMixin(), MetricsMixin([...INGEST_DEFINITIONS, ...TRIGGER_DEFINITIONS])],

	settings: {
		nfsMountRoot: null,
		checkMounts: true,
		s3CredentialsToAgents: false,
		// lib/launch/config.ts's defaults; lib/launch/services.ts sets the process's own
		dataDir: path.resolve("./data"),
		agentWorkDir: path.resolve("./data/agent")
	},

	methods: {
		/** Saves a strike and queues its job; answers the strike's id. */
		async createStrike(this: IngestThis, body: unknown): Promise<number> {
			const strike = await parseNewStrike(body, this.settings);
			const { strikeId, jobId } = await createStrike(this.db, strike);
			this.logger.info(
				{ strikeId, jobId, name: strike.name },
				"strike created; its job is queued"
			);
			this.broker.emit("queue.changed", { count: 1 });
			return strikeId;
		}
	},

	actions: {
		// ---- ingests -------------------------------------------------------------------------
		list: {
			rest: "GET /ingests",
			...listAction(
				INGEST_LIST,
				(rows: Parameters<typeof serializeIngests>[0], ctx) =>
					serializeIngests(rows, ctx.meta.apiRoot),
				"/api/ingests/"
			)
		},

		status: {
			rest: "GET /ingests/status",
			params: jsonParams({
				[QUERY_SCHEMA]: true,
				type: "object",
				properties: {
					page: LIST_PARAMS.page,
					page_size: LIST_PARAMS.page_size,
					started: LIST_PARAMS.started,
					ended: LIST_PARAMS.ended,
					use_ingest_time: { type: "string" }
				}
			}),
			handler(this: IngestThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				return getIngestStatus(this.db, listRequest(ctx, "/api/ingests/status/"));
			}
		},

		/** By id, or by file name (Scale's second URL pattern for the same view). */
		get: {
			rest: "GET /ingests/:ref",
			params: jsonParams({
				type: "object",
				required: ["ref"],
				properties: { ref: { type: "string" } }
			}),
			handler(this: IngestThis, ctx: Context<{ ref: string }, RequestMeta>) {
				return getIngestDetails(this.db, parseFileRef(ctx.params.ref), ctx.meta.apiRoot);
			}
		},

		// ---- strikes -------------------------------------------------------------------------
		strikes: {
			rest: "GET /strikes",
			...listAction(
				STRIKE_LIST,
				function (this: IngestThis, rows: StrikeRow[]) {
					return serializeStrikes(this.db, rows);
				},
				"/api/strikes/"
			)
		},

		/** POST /strike/create/, as the spec says: 200 {strike_id}. */
		createStrike: {
			rest: "POST /strike/create",
			params: jsonParams(BODY),
			async handler(this: IngestThis, ctx: Context<Record<string, unknown>>) {
				return { strike_id: await this.createStrike(ctx.params) };
			}
		},

		/** POST /strikes/, as Scale 3.0 answered it: 201, Location and the strike's details. */
		addStrike: {
			rest: "POST /strikes",
			params: jsonParams(BODY),
			async handler(this: IngestThis, ctx: Context<Record<string, unknown>, RequestMeta>) {
				const strikeId = await this.createStrike(ctx.params);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/strikes/${strikeId}/`;
				return withWarnings(
					await getStrikeDetails(this.db, strikeId),
					readOnlyWarnings(ctx.params, "strike")
				);
			}
		},

		validateStrike: {
			rest: "POST /strikes/validation",
			params: jsonParams(BODY),
			async handler(this: IngestThis, ctx: Context<Record<string, unknown>>) {
				const { warnings } = await validateStrike(this.db, ctx.params, this.settings);
				return { warnings: [...readOnlyWarnings(ctx.params, "strike"), ...warnings] };
			}
		},

		getStrike: {
			rest: "GET /strikes/:id",
			params: jsonParams({ type: "object", required: ["id"], properties: { id: ID_SCHEMA } }),
			handler(this: IngestThis, ctx: Context<{ id: number }>) {
				return getStrikeDetails(this.db, ctx.params.id);
			}
		},

		/** Title, description, configuration; the running monitor is told of a new configuration. */
		updateStrike: {
			rest: "PATCH /strikes/:id",
			params: jsonParams(EDIT_BODY),
			async handler(
				this: IngestThis,
				ctx: Context<{ id: number } & Record<string, unknown>>
			) {
				const { id, ...body } = ctx.params;
				const edit = await parseStrikeEdit(body, this.settings);
				const changed = await updateStrike(this.db, id, edit);
				if (changed) this.broker.broadcast("strike.changed", { strikeId: id });
				return withWarnings(
					await getStrikeDetails(this.db, id),
					readOnlyWarnings(ctx.params, "strike")
				);
			}
		},

		// ---- the monitors' side (lib/ingest/protocol.ts), internal ---------------------------
		monitorSetup: {
			visibility: "public",
			params: jsonParams(monitorParams()),
			handler(this: IngestThis, ctx: MonitorContext<unknown>) {
				return monitorSetup(
					this.db,
					ctx.params,
					ctx.nodeID ?? this.broker.nodeID,
					this.settings.s3CredentialsToAgents
				);
			}
		},

		transferring: {
			visibility: "public",
			params: jsonParams(TRANSFERRING_PARAMS),
			async handler(this: IngestThis, ctx: MonitorContext<{ files: TransferringFile[] }>) {
				await recordTransferring(
					this.db,
					ctx.params,
					ctx.nodeID ?? this.broker.nodeID,
					ctx.params.files
				);
				return { ok: true };
			}
		},

		arrived: {
			visibility: "public",
			params: jsonParams(ARRIVED_PARAMS),
			async handler(this: IngestThis, ctx: MonitorContext<{ files: ArrivedFile[] }>) {
				const decisions = await recordArrivals(
					this.db,
					ctx.params,
					ctx.nodeID ?? this.broker.nodeID,
					ctx.params.files
				);
				return { decisions };
			}
		},

		ingesting: {
			visibility: "public",
			params: jsonParams(INGESTING_PARAMS),
			async handler(this: IngestThis, ctx: MonitorContext<{ ingestIds: number[] }>) {
				await recordIngesting(
					this.db,
					ctx.params,
					ctx.nodeID ?? this.broker.nodeID,
					ctx.params.ingestIds
				);
				return { ok: true };
			}
		},

		/** An S3 strike's objects created (lib/ingest/s3-record.ts). */
		s3Objects: {
			visibility: "public",
			params: jsonParams(S3_OBJECTS_PARAMS),
			async handler(this: IngestThis, ctx: MonitorContext<{ objects: CreatedObject[] }>) {
				const recorded = await recordS3Objects(
					this.db,
					ctx.params,
					ctx.nodeID ?? this.broker.nodeID,
					ctx.params.objects
				);
				if (recorded.events > 0)
					this.broker.broadcast("trigger-events.created", {
						type: "INGEST",
						count: recorded.events
					});
				return recorded;
			}
		},

		settle: {
			visibility: "public",
			params: jsonParams(SETTLE_PARAMS),
			async handler(this: IngestThis, ctx: MonitorContext<{ results: Settled[] }>) {
				const { answers, triggered } = await settleIngests(
					this.db,
					ctx.params,
					ctx.nodeID ?? this.broker.nodeID,
					ctx.params.results
				);
				const ingested = answers.filter(a => a.status === "INGESTED").length;
				if (this.metered) {
					for (const a of answers)
						this.broker.metrics.increment(METRICS.ingestsEnded, { status: a.status });
					if (triggered.events > 0)
						this.broker.metrics.increment(
							METRICS.triggerEvents,
							undefined,
							triggered.events
						);
				}
				if (ingested > 0)
					this.logger.info(
						{
							strikeId: ctx.params.strikeId,
							ingested,
							settled: answers.length,
							jobs: triggered.jobs,
							recipes: triggered.recipes
						},
						"files ingested"
					);
				for (const r of triggered.refused)
					this.logger.warn(
						{ eventId: r.eventId, ruleId: r.ruleId },
						`trigger rule's job not created: ${r.reason}`
					);
				if (triggered.jobs > 0 || triggered.recipes > 0)
					this.broker.emit("queue.changed", {
						count: triggered.jobs + triggered.recipes
					});
				return { answers };
			}
		}
	}
};

export default IngestService;
