import type { ErrorMapping, JobInterface } from "../documents/types";

/**
 * What the scheduler knows of the executions it placed, from the statement that placed them:
 * what recording their ends reads of each (EndingExe). A report of executions all known here
 * then needs no read before the statement that completes them: a round trip less between a
 * recipe job's completion and its dependents' queueing, each a wait for a cpu under load
 * (docs/decisions.md, "Recipes"). Bounded: the oldest are forgotten first, and a report of an
 * execution forgotten, or placed by another replica, is read as before.
 */
export class PlacedExecutions {
	private readonly known = new Map<number, EndingExe>();

	constructor(private readonly max = 10000) {}

	get size(): number {
		return this.known.size;
	}

	remember(placed: readonly PlacedExe[]): void {
		for (const exe of placed) {
			this.known.set(exe.id, {
				id: exe.id,
				agent_id: exe.agent_id,
				job_id: exe.job_id,
				node_id: exe.node_id,
				num_exes: exe.num_exes,
				max_tries: exe.max_tries,
				job_type_id: exe.job_type_id,
				name: exe.name,
				version: exe.version,
				is_operational: exe.is_operational,
				is_long_running: exe.is_long_running,
				data: exe.data,
				interface: exe.interface,
				error_mapping: exe.error_mapping,
				in_recipe: exe.in_recipe
			});
		}
		// a Map iterates in insertion order: the first keys are the oldest
		for (const id of this.known.keys()) {
			if (this.known.size <= this.max) break;
			this.known.delete(id);
		}
	}

	/** The executions of these ids, all of them, each forgotten; null (and none forgotten) if one is not known. */
	takeAll(ids: readonly number[]): EndingExe[] | null {
		const found: EndingExe[] = [];
		for (const id of ids) {
			const exe = this.known.get(id);
			if (!exe) return null;
			found.push(exe);
		}
		for (const id of ids) this.known.delete(id);
		return found;
	}
}

/** A placed execution, as the claim statement answers it: what the agent's ExecutionSpec needs. */
export interface PlacedExe {
	id: number;
	job_id: number;
	timeout: number;
	node_id: number;
	agent_id: string;
	cpus: number;
	mem: number;
	disk_total: number;
	data: any;
	interface: any;
	job_type_id: number;
	name: string;
	version: string;
	uses_docker: boolean;
	docker_image: string | null;
	docker_privileged: boolean;
	is_long_running: boolean;
	is_system: boolean;
	/** what recording its end needs besides (PlacedExecutions, lib/executions/finish.ts) */
	num_exes: number;
	max_tries: number;
	is_operational: boolean;
	error_mapping: EndingExe["error_mapping"];
	in_recipe: boolean;
	/** seconds from queued to placed */
	queue_wait_s?: number;
}

export interface EndingExe {
	id: number;
	/** the agent running it: a report from another agent ends nothing */
	agent_id: string | null;
	job_id: number;
	node_id: number | null;
	num_exes: number;
	max_tries: number;
	job_type_id: number;
	name: string;
	version: string;
	is_operational: boolean;
	is_long_running: boolean;
	data: any;
	interface: JobInterface | null;
	error_mapping: ErrorMapping | null;
	/** whether its job belongs to a recipe */
	in_recipe: boolean;
}
