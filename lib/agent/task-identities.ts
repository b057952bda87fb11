import { execFileSync } from "child_process";
import type { TaskIdentity } from "./launcher";

/**
 * Who the tasks of an agent run as. An agent running as root gives each execution a uid (and a
 * group of the same number) of its own, from a range no account uses: its processes can neither
 * signal, trace nor write those of another job, nor anything of the agent's, and the files it
 * leaves are told from anyone else's by their owner. The numbers need no account in
 * /etc/passwd (as a container's `--user 1000:1000` needs none). An operator may name one user
 * instead (AGENT_TASK_USER), which every task then shares. An agent that is not root can switch
 * to no one: its tasks run as itself.
 */
export interface TaskIdentities {
	/** a description for the agent's start log */
	readonly description: string;
	/** An identity for a new execution; null when every one is in use. */
	take(): TaskIdentity | null;
	/** Gives an identity back once nothing of its execution is left that it could reach. */
	give(identity: TaskIdentity): void;
}

/** The uids executions get by default (AGENT_TASK_UIDS): a range no account uses. */
export const DEFAULT_TASK_UIDS = { first: 1_900_000_000, count: 100_000 };

/** Each execution a uid of its own, from `first` to `first + count - 1`, taken in turn. */
export class UidRange implements TaskIdentities {
	private readonly used = new Set<number>();
	private next = 0;

	constructor(
		readonly first: number,
		readonly count: number
	) {}

	get description(): string {
		return `each execution its own uid and gid, from ${this.first} to ${this.first + this.count - 1}`;
	}

	take(): TaskIdentity | null {
		// in turn rather than the lowest free: a number is used again as late as can be
		for (let i = 0; i < this.count; i++) {
			const uid = this.first + ((this.next + i) % this.count);
			if (this.used.has(uid)) continue;
			this.used.add(uid);
			this.next = (this.next + i + 1) % this.count;
			return { uid, gid: uid };
		}
		return null;
	}

	give(identity: TaskIdentity): void {
		this.used.delete(identity.uid);
	}
}

/** One named user that every task runs as. */
export class SharedUser implements TaskIdentities {
	constructor(
		readonly name: string,
		private readonly identity: TaskIdentity
	) {}

	get description(): string {
		return `the user ${this.name} (uid ${this.identity.uid}, gid ${this.identity.gid}) for every execution`;
	}

	take(): TaskIdentity {
		return this.identity;
	}

	give(): void {}
}

/** The uid and primary gid of a user, from the system's accounts (`id`); throws when unknown. */
export function lookUpUser(name: string): TaskIdentity {
	const id = (flag: string) =>
		Number(execFileSync("id", [flag, "--", name], { encoding: "utf8" }).trim());
	let identity: TaskIdentity;
	try {
		identity = { uid: id("-u"), gid: id("-g") };
	} catch {
		throw new Error(
			`AGENT_TASK_USER names the user "${name}", which this machine does not have`
		);
	}
	if (identity.uid === 0)
		throw new Error(
			`AGENT_TASK_USER names "${name}", which is root: tasks must not run as root`
		);
	return identity;
}

/**
 * The identities of an agent's tasks: a named user, else a uid range when the agent is root,
 * else none (null: tasks run as the agent's own user).
 */
export function taskIdentities(options: {
	user: string | null;
	uids: { first: number; count: number };
	isRoot: boolean;
}): TaskIdentities | null {
	if (!options.isRoot) return null;
	if (options.user) return new SharedUser(options.user, lookUpUser(options.user));
	return new UidRange(options.uids.first, options.uids.count);
}
