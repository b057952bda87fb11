import { Client } from "pg";

/** The advisory lock key of the scheduler's leadership ("SCALE" + 1). */
export const SCHEDULER_LOCK_KEY = 0x5ca1e001;

/** The application_name prefix of the leader's connection: `GET /status/` finds the leader by it. */
export const LEADER_APPLICATION_NAME = "scale-scheduler:";

/** A failed attempt is logged the first time, then once in this many (every ~10 s at 250 ms). */
const LOG_EVERY_FAILURES = 40;

export interface LeaderOptions {
	url: string;
	key?: number;
	/** who this replica is (its Moleculer nodeID), shown on its lock connection */
	name?: string;
	/** how long to wait between attempts while another process leads */
	retryMs?: number;
	/**
	 * how long to wait before trying again when PostgreSQL could not be reached or the lock's
	 * connection was lost (nobody may lead then: the lock went with every connection)
	 */
	reconnectMs?: number;
	/** called with the dedicated connection once the lock is held */
	onAcquired: (client: Client) => void;
	/** called when the lock is lost (its connection died) or given up (stop) */
	onLost: (reason: string) => void;
	log?: (message: string, error?: unknown) => void;
}

/**
 * One leader at a time across replicas: a session-level `pg_try_advisory_lock` held on a
 * dedicated connection. Losers try again every `retryMs`. The lock goes with its connection, so
 * a leader that dies (or whose connection dies) frees it at once for another replica, and the
 * holder learns of the loss from the connection's error or end. When the lock's connection is
 * lost, or cannot be made, the next attempt comes after `reconnectMs` (a refused connect is
 * cheap): after a PostgreSQL outage, where every replica lost it, someone leads again within
 * that of the server's return, not within `retryMs`.
 */
export class LeaderLock {
	private client: Client | null = null;
	private timer: NodeJS.Timeout | null = null;
	private leading = false;
	private stopped = false;
	/** attempts in a row that could not reach PostgreSQL (logged once, then now and then) */
	private failures = 0;
	private readonly key: number;
	private readonly retryMs: number;
	private readonly reconnectMs: number;

	constructor(private readonly opts: LeaderOptions) {
		this.key = opts.key ?? SCHEDULER_LOCK_KEY;
		this.retryMs = opts.retryMs ?? 3000;
		this.reconnectMs = opts.reconnectMs ?? 250;
	}

	get isLeader(): boolean {
		return this.leading;
	}

	/** Starts trying; resolves after the first attempt. */
	async start(): Promise<void> {
		this.stopped = false;
		await this.attempt();
	}

	/** Gives the lock up (closing its connection) and stops trying. */
	async stop(): Promise<void> {
		this.stopped = true;
		if (this.timer) clearTimeout(this.timer);
		this.timer = null;
		const client = this.client;
		this.client = null;
		if (this.leading) {
			this.leading = false;
			this.opts.onLost("stopped");
		}
		if (client) await client.end().catch(() => undefined);
	}

	private later(ms: number): void {
		if (this.stopped || this.timer) return;
		this.timer = setTimeout(() => {
			this.timer = null;
			void this.attempt();
		}, ms);
		this.timer.unref?.();
	}

	private lose(client: Client, reason: string): void {
		if (this.client !== client) return;
		this.client = null;
		client.end().catch(() => undefined);
		if (this.leading) {
			this.leading = false;
			this.opts.onLost(reason);
		}
		this.later(this.reconnectMs);
	}

	private async attempt(): Promise<void> {
		if (this.stopped || this.leading) return;
		try {
			if (!this.client) {
				const client = new Client({
					connectionString: this.opts.url,
					keepAlive: true,
					query_timeout: 30000,
					// a statement goes when it is called, not when the one before it is answered:
					// a pass reads its context and its first batch in one round trip (claim.ts)
					pipeline: true,
					// PostgreSQL keeps 63 bytes of it
					application_name: `${LEADER_APPLICATION_NAME}${this.opts.name ?? ""}`.slice(
						0,
						63
					)
				});
				client.on("error", error => {
					this.opts.log?.("leader connection failed", error);
					this.lose(client, `connection error: ${error.message}`);
				});
				client.on("end", () => this.lose(client, "connection ended"));
				this.client = client;
				await client.connect();
				// The leader's work runs on this connection too: a leader killed in the middle of
				// a statement (or of a wait for a row lock) would keep the lock until the statement
				// ended, PostgreSQL noticing a lost client only when it next reads from it. Checked
				// each second instead (PostgreSQL 14+; older servers keep their behaviour).
				await client
					.query("SET client_connection_check_interval = 1000")
					.catch(() => undefined);
			}
			const client = this.client;
			const { rows } = await client.query("SELECT pg_try_advisory_lock($1) AS ok", [
				this.key
			]);
			this.failures = 0;
			if (this.stopped || this.client !== client) {
				if (rows[0]?.ok) await client.end().catch(() => undefined);
				return;
			}
			if (rows[0]?.ok) {
				this.leading = true;
				this.opts.onAcquired(client);
				return;
			}
		} catch (error) {
			if (this.failures++ === 0) this.opts.log?.("leader lock attempt failed", error);
			else if (this.failures % LOG_EVERY_FAILURES === 0)
				this.opts.log?.(
					`leader lock attempt failed (${this.failures} times in a row)`,
					error
				);
			if (this.client) {
				const client = this.client;
				this.client = null;
				client.end().catch(() => undefined);
			}
			this.later(this.reconnectMs);
			return;
		}
		this.later(this.retryMs);
	}
}
