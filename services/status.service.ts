import os from "os";
import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin } from "../mixins/db.mixin";
import { PrometheusGaugesMixin } from "../mixins/prometheus-gauges.mixin";
import { readClusterState, sharedHostWarnings, type ClusterStatus } from "../lib/records/status";

import { VERSION } from "../lib/paths";
import { jsonParams } from "../lib/validation/params";

interface StatusSettings {
	/** the REST API port, reported as the master's */
	apiPort: number;
}

const StatusService: ServiceSchema<StatusSettings> = {
	name: "status",
	settings: { apiPort: 8000 },
	mixins: [DbMixin(), PrometheusGaugesMixin()],

	actions: {
		get: {
			rest: "GET /status",
			params: jsonParams({ type: "object" }),
			async handler(this: Service<StatusSettings>, _ctx: Context): Promise<ClusterStatus> {
				const state = await readClusterState(this.db);
				return {
					master: {
						hostname: os.hostname(),
						port: this.settings.apiPort,
						is_online: true
					},
					// the replica that leads (holds the lock), as PostgreSQL sees it
					scheduler: {
						hostname: state.leader,
						is_online: state.leader !== null,
						is_paused: state.isPaused
					},
					queue_depth: state.queueDepth,
					// Real-time usage is not measured, so `used` is zeros, as the spec says.
					resources: {
						total: state.total,
						scheduled: state.scheduled,
						used: { cpus: 0, mem: 0, disk: 0 }
					},
					warnings: sharedHostWarnings(state.shared)
				};
			}
		},

		version: {
			rest: "GET /version",
			params: jsonParams({ type: "object" }),
			handler() {
				return { version: VERSION };
			}
		}
	}
};

export default StatusService;
