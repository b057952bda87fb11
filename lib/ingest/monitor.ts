import { promises as fs, watch, type FSWatcher } from "fs";
import path from "path";
import { runSqsMonitor } from "./sqs-monitor";
import type { Launched } from "../agent/launcher";
import { BATCH_MAX, BATCHES_AT_ONCE, nextBatch } from "./batches";
import { FsThread } from "./fs-thread";
import { Folder } from "./file-paths";
import { settlementsOf } from "./recovery";
import { asideFolder, copyAcross, outcomeOf, type BatchContext } from "./outcomes";
import {
	ASIDE_FOLDERS,
	isRefusal,
	type ArrivedFile,
	type Decision,
	type MonitorCall,
	type MonitorSetup,
	type OpenIngest,
	type SettleAnswer,
	type Settled,
	type TransferringFile
} from "./protocol";

/**
 * A strike's monitor, run by the node agent that runs the strike's job, in the agent's own
 * process (docs/decisions.md, "Strike"): it watches the strike's directory by file-system events
 * and by a rescan every rescanMs (events are lost on some file systems and while nothing
 * watches), tells the `ingest` service what it sees, and moves each file where the service
 * decides: into its workspace, or aside into `deferred/`, `duplicate/` or `errored/` of the
 * directory. Files are handled in batches: one call records a batch's arrivals, one its outcomes.
 */

export interface MonitorLink {
	/** a Moleculer call to the control plane */
	call<T>(action: string, params: Record<string, unknown>): Promise<T>;
	info(message: string): void;
	warn(message: string): void;
}

export interface MonitorOptions {
	/** how often the directory is listed again and the configuration read again; default 5 s */
	rescanMs?: number;
	/** files per call; default BATCH_MAX */
	batchMax?: number;
	/** how often a growing file's size is reported; default 1 s */
	progressMs?: number;
}

interface Transfer {
	started: string;
	reportedBytes: number;
	reportedAt: number;
}

export class StrikeMonitor {
	private directory = "";
	/** the paths of names in `directory` */
	private folder = new Folder(path.join, "");
	private suffix = "";
	private watcher: FSWatcher | null = null;
	private readonly dirty = new Set<string>();
	/**
	 * Names this monitor is moving out of the directory: the watcher's event of each move is
	 * its own doing, not a file to look at (an lstat that finds nothing, per file). Forgotten at
	 * every rescan, so a name whose event never came costs at most a rescan's wait.
	 */
	private readonly leaving = new Set<string>();
	private readonly transfers = new Map<string, Transfer>();
	/** the workers handling batches (kick) */
	private readonly workers = new Set<Promise<void>>();
	/** the files of the batches under way (fileOf) */
	private readonly inFlight = new Set<string>();
	private refusal: Error | null = null;
	/** why the monitor cannot watch its directory (it is missing), ending its execution */
	private failure: string | null = null;
	private stopped = false;
	private wake: () => void = () => undefined;
	private readonly rescanMs: number;
	private readonly batchMax: number;
	private readonly progressMs: number;
	/** where the file-system calls of the batches are made */
	private readonly files = new FsThread();

	constructor(
		private readonly task: MonitorCall,
		private readonly link: MonitorLink,
		options: MonitorOptions = {}
	) {
		this.rescanMs = options.rescanMs ?? 5000;
		this.batchMax = options.batchMax ?? BATCH_MAX;
		this.progressMs = options.progressMs ?? 1000;
	}

	/** Runs until `signal` aborts (answers 0) or the control plane refuses it (answers 1). */
	async run(signal: AbortSignal): Promise<number> {
		const stopped = new Promise<void>(resolve => {
			this.wake = resolve;
			signal.addEventListener("abort", () => resolve(), { once: true });
		});
		if (signal.aborted) return 0;
		let timer: NodeJS.Timeout | null = null;
		try {
			let setup: MonitorSetup | null = null;
			while (!setup && !signal.aborted && !this.refusal && !this.failure) {
				setup = await this.setup();
				if (!setup) await Promise.race([stopped, delay(this.rescanMs)]);
			}
			if (!setup) return this.refusal || this.failure ? 1 : 0;
			if (setup.sqs)
				return await runSqsMonitor(this.task, setup.sqs, this.link, signal, this.rescanMs);
			this.link.info(
				`strike ${this.task.strikeId}: watching ${this.directory} (${setup.open.length} ingests left open)`
			);
			await this.scan();
			await this.recover(setup.open);
			let openBefore = new Set(setup.open.map(i => i.ingestId));
			const tick = async () => {
				if (this.stopped) return;
				const again = await this.setup();
				await this.scan();
				// Ingests open at two rescans in a row, with their files handled in between, are
				// settled from where their files are, as an earlier monitor's are at the start: a
				// settle call that failed (the control plane restarting) or a file-system thread
				// that died after its moves would otherwise leave them open while this monitor runs.
				if (again && !this.stopped) {
					const stale = again.open.filter(i => openBefore.has(i.ingestId));
					openBefore = new Set(again.open.map(i => i.ingestId));
					await this.recover(stale);
				}
				if (!this.stopped) timer = setTimeout(tick, this.rescanMs);
			};
			timer = setTimeout(tick, this.rescanMs);
			await stopped;
		} finally {
			this.stopped = true;
			if (timer) clearTimeout(timer);
			this.watcher?.close();
			await this.idle();
			await this.files.stop();
		}
		this.link.info(`strike ${this.task.strikeId}: monitor stopped`);
		return this.refusal || this.failure ? 1 : 0;
	}

	/** Why the monitor stopped on its own, when its directory is missing; null otherwise. */
	get failed(): string | null {
		return this.failure;
	}

	/** Tells the monitor that its configuration changed: read it again now. */
	async reload(): Promise<void> {
		if (this.stopped) return;
		await this.setup();
		await this.scan();
	}

	private async call<T>(action: string, params: Record<string, unknown>): Promise<T | null> {
		try {
			return await this.link.call<T>(action, { ...this.task, ...params });
		} catch (error: any) {
			if (isRefusal(error)) {
				this.refusal = error;
				this.link.warn(
					`strike ${this.task.strikeId}: the control plane refused this monitor (${error.message}); stopping`
				);
				this.stopped = true;
				this.wake();
			} else
				this.link.warn(
					`strike ${this.task.strikeId}: ${action} failed (retried at the next rescan): ${error?.message ?? error}`
				);
			return null;
		}
	}

	/** Reads the configuration; (re)watches the directory when it changed. */
	private async setup(): Promise<MonitorSetup | null> {
		const setup = await this.call<MonitorSetup>("ingest.monitorSetup", {});
		if (!setup || this.stopped || setup.sqs) return setup;
		this.suffix = setup.transferSuffix;
		if (setup.directory !== this.directory || !this.watcher) {
			this.directory = setup.directory;
			this.folder = new Folder(path.join, setup.directory);
			this.watcher?.close();
			this.watcher = null;
			// the directory is the operator's (a host path, a network mount): a missing one is
			// an export not mounted yet or a typo, never something to create and watch empty
			const missing = await missingDirectory(this.directory);
			if (missing !== null) {
				this.failure = `strike ${this.task.strikeId}: ${missing}; mount it (or fix the strike's configuration), then requeue the strike's job`;
				this.link.warn(this.failure);
				this.stopped = true;
				this.wake();
				return null;
			}
			try {
				for (const folder of Object.values(ASIDE_FOLDERS))
					await fs.mkdir(path.join(this.directory, folder), { recursive: true });
				this.watcher = watch(this.directory, (_event, name) => {
					if (typeof name === "string" && name !== "" && !this.leaving.delete(name))
						this.mark(name);
				});
				this.watcher.on("error", error => {
					this.link.warn(
						`strike ${this.task.strikeId}: watching ${this.directory} failed (${error.message}); the rescan goes on`
					);
					this.watcher?.close();
					this.watcher = null;
				});
			} catch (error) {
				this.link.warn(
					`strike ${this.task.strikeId}: cannot watch ${this.directory}: ${(error as Error).message}; tried again every ${this.rescanMs / 1000} s`
				);
			}
		}
		return setup;
	}

	private mark(name: string): void {
		// hidden names are other tools' temporary files (rsync's, editors'), never ingested
		if (name.startsWith(".") || name.includes("/")) return;
		this.dirty.add(name);
		this.kick();
	}

	/** Lists the directory and handles every file in it. */
	private async scan(): Promise<void> {
		if (this.stopped || !this.directory) return;
		let names: string[];
		try {
			names = await fs.readdir(this.directory);
		} catch (error) {
			this.link.warn(
				`strike ${this.task.strikeId}: cannot list ${this.directory}: ${(error as Error).message}`
			);
			return;
		}
		this.leaving.clear();
		for (const name of names) if (!name.startsWith(".")) this.dirty.add(name);
		// transfers whose file is gone without arriving (deleted by its sender) are forgotten
		const present = new Set(names);
		for (const final of this.transfers.keys())
			if (!present.has(final) && !present.has(final + this.suffix))
				this.transfers.delete(final);
		this.kick();
		await this.idle();
	}

	/** Resolves once every marked file has been handled. */
	private async idle(): Promise<void> {
		while (this.workers.size > 0) await Promise.all([...this.workers]);
	}

	/**
	 * Starts workers for the marked files, up to BATCHES_AT_ONCE: each takes the next batch of
	 * names no other batch holds, as soon as its last batch is done, until none is left.
	 */
	private kick(): void {
		while (!this.stopped && this.workers.size < BATCHES_AT_ONCE && this.takeable()) {
			const worker: Promise<void> = this.work().finally(() => {
				this.workers.delete(worker);
				if (this.dirty.size > 0) this.kick();
			});
			this.workers.add(worker);
		}
	}

	/** Whether a marked name's file is not in a batch under way. */
	private takeable(): boolean {
		for (const name of this.dirty) if (!this.inFlight.has(this.fileOf(name))) return true;
		return false;
	}

	/**
	 * The file a name is of: a name with the transfer suffix is the file it will be named when
	 * whole. Its two names go to one batch at a time: a batch that recorded it TRANSFERRING is
	 * done before another records its arrival, which takes that ingest up.
	 */
	private fileOf(name: string): string {
		const { suffix } = this;
		return suffix && name.endsWith(suffix) && name.length > suffix.length
			? name.slice(0, -suffix.length)
			: name;
	}

	private async work(): Promise<void> {
		// a moment for the rest of a burst of events to arrive
		await new Promise(resolve => setImmediate(resolve));
		try {
			while (!this.stopped) {
				const batch = nextBatch(this.dirty, this.inFlight, this.batchMax, name =>
					this.fileOf(name)
				);
				if (batch.length === 0) return;
				const files = batch.map(name => this.fileOf(name));
				for (const name of batch) this.dirty.delete(name);
				for (const file of files) this.inFlight.add(file);
				try {
					await this.handle(batch);
				} finally {
					for (const file of files) this.inFlight.delete(file);
				}
			}
		} catch (error) {
			this.link.warn(
				`strike ${this.task.strikeId}: handling files failed: ${(error as Error)?.stack ?? error}`
			);
		}
	}

	/** One batch: sizes read, transfers reported, arrivals recorded, moved and settled. */
	private async handle(names: string[]): Promise<void> {
		const now = Date.now();
		const stats = await this.files.lstat(names.map(name => this.folder.path(name)));
		const growing: TransferringFile[] = [];
		const arrived: ArrivedFile[] = [];
		const at = new Date(now).toISOString();
		for (let i = 0; i < names.length; i++) {
			const stat = stats[i];
			if (!stat || !stat.isFile) continue;
			const name = names[i];
			if (this.suffix && name.endsWith(this.suffix) && name.length > this.suffix.length) {
				const final = name.slice(0, -this.suffix.length);
				let transfer = this.transfers.get(final);
				const fresh = !transfer;
				transfer ??= { started: at, reportedBytes: -1, reportedAt: 0 };
				this.transfers.set(final, transfer);
				if (
					fresh ||
					(stat.size !== transfer.reportedBytes &&
						now - transfer.reportedAt >= this.progressMs)
				) {
					growing.push({ name: final, bytes: stat.size, started: transfer.started });
					transfer.reportedBytes = stat.size;
					transfer.reportedAt = now;
				} else if (stat.size !== transfer.reportedBytes) {
					// reported at the next rescan, or sooner when the file changes again
					setTimeout(() => this.mark(name), this.progressMs).unref();
				}
				continue;
			}
			arrived.push({
				name,
				size: stat.size,
				transferStarted: this.transfers.get(name)?.started ?? at,
				transferEnded: at
			});
		}
		if (growing.length > 0) await this.call("ingest.transferring", { files: growing });
		if (arrived.length === 0 || this.stopped) return;
		const answer = await this.call<{ decisions: Decision[] }>("ingest.arrived", {
			files: arrived
		});
		if (!answer) return;
		for (const file of arrived) this.transfers.delete(file.name);
		const sizes = new Map(arrived.map(file => [file.name, file.size]));
		const decisions = answer.decisions;
		for (const d of decisions) if (d.action === "ingest") this.leaving.add(d.name);
		// the batch's files moved in one request: into their workspaces (links only), or aside
		const moved = await this.files.move(
			decisions.map(d => {
				const from = this.folder.path(d.name);
				return d.action === "ingest"
					? { from, to: d.target, linkOnly: true }
					: {
							from,
							folder: asideFolder(this.directory, d.status),
							tag: String(d.ingestId)
						};
			})
		);
		const batch = this.batchContext();
		const waiting = await copyAcross(batch, decisions, moved);
		const results: Settled[] = [];
		for (let i = 0; i < decisions.length; i++) {
			if (waiting.has(i)) continue;
			const result = await outcomeOf(
				batch,
				decisions[i],
				moved[i],
				sizes.get(decisions[i].name) ?? 0
			);
			if (result) results.push(result);
		}
		await this.settle(results);
	}

	/** What the outcomes of a batch's moves need of this monitor (lib/ingest/outcomes.ts). */
	private batchContext(): BatchContext {
		return {
			strikeId: this.task.strikeId,
			directory: this.directory,
			folder: this.folder,
			files: this.files,
			leaving: this.leaving,
			call: (action, params) => this.call(action, params),
			warn: message => this.link.warn(message)
		};
	}

	private async settle(results: Settled[]): Promise<void> {
		if (results.length === 0) return;
		const answer = await this.call<{ answers: SettleAnswer[] }>("ingest.settle", { results });
		const late = (answer?.answers ?? []).flatMap(a =>
			a.moveAside
				? [
						{
							from: a.moveAside,
							folder: asideFolder(this.directory, "DUPLICATE"),
							tag: String(a.ingestId)
						}
					]
				: []
		);
		const moved = await this.files.move(late);
		moved.forEach((m, i) => {
			if (!("to" in m))
				this.link.warn(
					`strike ${this.task.strikeId}: cannot move the duplicate ${late[i].from} aside: ${m.error.message}`
				);
		});
	}

	/** Settles open ingests whose files the scan did not take up again (see settlementsOf). */
	private async recover(open: OpenIngest[]): Promise<void> {
		await this.settle(await settlementsOf(open, this.directory, this.suffix));
	}
}

function delay(ms: number): Promise<void> {
	return new Promise(resolve => setTimeout(resolve, ms).unref());
}

/** Why a monitor cannot watch `directory`, or null when it is a directory. */
async function missingDirectory(directory: string): Promise<string | null> {
	try {
		if ((await fs.stat(directory)).isDirectory()) return null;
		return `${directory} is not a directory`;
	} catch (error) {
		const code = (error as NodeJS.ErrnoException).code;
		if (code === "ENOENT" || code === "ENOTDIR")
			return `the directory ${directory} it watches does not exist on this node`;
		// anything else (EACCES, EIO) may pass: the watch is tried again at every rescan
		return null;
	}
}

/**
 * The monitor as a launched task, for the agent's execution: it runs until the execution is
 * canceled or the agent stops (kill), exit code 0, or until the control plane refuses it, 1.
 */
export function launchStrikeMonitor(monitor: StrikeMonitor): Launched {
	const abort = new AbortController();
	const exited = monitor.run(abort.signal).then(
		code => ({ code, signal: null, groupKilled: true, failed: monitor.failed ?? undefined }),
		(error: Error) => ({ code: null, signal: null, groupKilled: true, lost: error.message })
	);
	return { pid: 0, exited, kill: () => abort.abort() };
}
