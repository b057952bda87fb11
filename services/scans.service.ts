import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { ListMixin } from "../mixins/list.mixin";
import {
	createScan,
	getScan,
	SCAN_LIST,
	serializeScan,
	serializeScanDetails,
	startScan,
	updateScan,
	validateScan,
	type ScanRow
} from "../lib/ingest/scans";
import { claimScans, walkScan } from "../lib/ingest/scan-walk";
import type { RequestMeta } from "../types/meta";
import { jsonParams } from "../lib/validation/params";
import { ID_SCHEMA } from "../lib/validation/ids";

/**
 * Scans (Scale 5.0): `/scans/` and their walks. Any replica walks a running scan whose lease has
 * run out (lib/ingest/scan-walk.ts), one scan at a time.
 */

interface ScansSettings extends ServiceSettingSchema {
	/** how often running scans without a live walker are looked for */
	claimMs: number;
	/** a walker's lease, renewed at each page: a dead walker's scan is resumed after this */
	leaseMs: number;
	/** files per page (recorded, then the progress written) */
	pageSize: number;
}

interface ScansVars {
	timer: NodeJS.Timeout | null;
	walking: Promise<void> | null;
	stopping: boolean;
}

interface ScansMethods {
	walk(): void;
}

type ScansThis = Service<ScansSettings> & ScansVars & ScansMethods;

const BODY = { type: "object" };
const ID_PARAMS = { type: "object", required: ["id"], properties: { id: ID_SCHEMA } };

const ScansService: ServiceSchema<ScansSettings, ScansMethods, ScansVars> = {
	name: "scans",
	mixins: [
		DbMixin(),
		ListMixin<ScanRow>(SCAN_LIST, rows => rows.map(serializeScan), "GET /scans")
	],

	settings: { claimMs: 5000, leaseMs: 30000, pageSize: 1000 },

	actions: {
		create: {
			rest: "POST /scans",
			params: jsonParams(BODY),
			async handler(this: ScansThis, ctx: Context<unknown, RequestMeta>) {
				const row = await createScan(this.db, ctx.params);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/scans/${row.id}/`;
				return serializeScanDetails(row);
			}
		},

		validate: {
			rest: "POST /scans/validation",
			params: jsonParams(BODY),
			handler(this: ScansThis, ctx: Context<unknown>) {
				return validateScan(this.db, ctx.params);
			}
		},

		get: {
			rest: "GET /scans/:id",
			params: jsonParams(ID_PARAMS),
			async handler(this: ScansThis, ctx: Context<{ id: number }>) {
				return serializeScanDetails(await getScan(this.db, ctx.params.id));
			}
		},

		update: {
			rest: "PATCH /scans/:id",
			params: jsonParams({ ...ID_PARAMS, properties: { id: ID_SCHEMA } }),
			async handler(this: ScansThis, ctx: Context<{ id: number }>) {
				const { id, ...edit } = ctx.params;
				return serializeScanDetails(await updateScan(this.db, id, edit));
			}
		},

		/** Starts a dry run (`ingest` false, the default) or an ingest; 201 with the scan. */
		process: {
			rest: "POST /scans/:id/process",
			params: jsonParams({
				type: "object",
				required: ["id"],
				properties: { id: ID_SCHEMA, ingest: { type: "boolean" } }
			}),
			async handler(
				this: ScansThis,
				ctx: Context<{ id: number; ingest?: boolean }, RequestMeta>
			) {
				const row = await startScan(this.db, ctx.params.id, ctx.params.ingest ?? false);
				ctx.meta.$statusCode = 201;
				ctx.meta.$location = `/scans/${row.id}/`;
				this.walk();
				return serializeScanDetails(row);
			}
		}
	},

	methods: {
		/** Claims the running scans no walker holds and walks them, unless a walk is under way. */
		walk(this: ScansThis) {
			if (this.walking || this.stopping) return;
			const owner = this.broker.nodeID;
			this.walking = (async () => {
				for (const id of await claimScans(this.db, owner, this.settings.leaseMs)) {
					if (this.stopping) break;
					await walkScan(this.db, id, {
						owner,
						leaseMs: this.settings.leaseMs,
						pageSize: this.settings.pageSize,
						stopping: () => this.stopping,
						onEvents: count =>
							this.broker.broadcast("trigger-events.created", {
								type: "INGEST",
								count
							})
					});
				}
			})()
				.catch(error =>
					this.logger.warn({ err: error }, "a scan's walk failed; tried again")
				)
				.finally(() => {
					this.walking = null;
				});
		}
	},

	created(this: ScansThis) {
		this.timer = null;
		this.walking = null;
		this.stopping = false;
	},

	started(this: ScansThis) {
		this.timer = setInterval(() => this.walk(), this.settings.claimMs);
		this.walk();
	},

	async stopped(this: ScansThis) {
		this.stopping = true;
		if (this.timer) clearInterval(this.timer);
		await this.walking;
	}
};

export default ScansService;
