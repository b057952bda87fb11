import type { ServiceBroker } from "moleculer";

/** What the cluster can name now: job type names, active nodes' ids, QUEUED jobs' ids. */
export type AskedKind = "job-type" | "node" | "queued-job";

/** What can be completed after a command: a kind of value, or a fixed list. */
export type ValueKind = AskedKind | readonly string[];

/** The values of a kind the cluster has now; none when it cannot say. */
export type ValueSource = (kind: AskedKind) => Promise<string[]>;

/** What the completer needs of a command. */
export interface CompletableCommand {
	/** moleculer-repl's `command`: its name, then its operands ("logs <id>") */
	command: string;
	alias?: string[];
	options?: { option: string }[];
	/** the values its first operand and its options' values take */
	values?: { operand?: ValueKind; options?: Record<string, ValueKind> };
}

interface Spec {
	names: string[];
	/** each flag ("-f", "--follow") and whether it takes a value */
	flags: Map<string, boolean>;
	/** the long and the short name of each option, as one */
	sameAs: Map<string, string[]>;
	operand?: ValueKind;
	optionValues: Record<string, ValueKind>;
}

function specOf(command: CompletableCommand): Spec {
	const flags = new Map<string, boolean>();
	const sameAs = new Map<string, string[]>();
	const optionValues: Record<string, ValueKind> = {};
	for (const { option } of command.options ?? []) {
		const names = option.match(/--?[a-z][a-z-]*/gi) ?? [];
		const valued = option.includes("<");
		for (const name of names) {
			flags.set(name, valued);
			sameAs.set(name, names);
		}
		const kind = names.map(n => command.values?.options?.[n]).find(k => k !== undefined);
		if (kind !== undefined) for (const name of names) optionValues[name] = kind;
	}
	return {
		names: [command.command.split(" ")[0], ...(command.alias ?? [])],
		flags,
		sameAs,
		operand: command.values?.operand,
		optionValues
	};
}

/**
 * Tab completion of our commands' options and values (readline's completer: the candidates for
 * the line's last word, and that word). A line's first word, or another command's line, is not
 * ours: null, for moleculer-repl's own completer.
 */
export function completer(
	commands: readonly CompletableCommand[],
	values: ValueSource
): (line: string) => Promise<[string[], string] | null> {
	const specs = commands.map(specOf);
	return async line => {
		const words = line.trimStart().split(/\s+/);
		if (words.length < 2) return null;
		const spec = specs.find(s => s.names.includes(words[0]));
		if (!spec) return null;
		const last = words[words.length - 1];
		const before = words.slice(1, -1);
		const previous = before[before.length - 1];
		const hits = (candidates: readonly string[]): [string[], string] => [
			candidates.filter(c => c.startsWith(last)),
			last
		];
		const valuesOf = async (kind: ValueKind) =>
			typeof kind === "string" ? await values(kind).catch(() => []) : kind;
		if (previous !== undefined && spec.flags.get(previous)) {
			const kind = spec.optionValues[previous];
			return hits(kind === undefined ? [] : await valuesOf(kind));
		}
		// options not given yet (one name of each: a short one taken takes its long one too)
		const used = new Set(before.flatMap(w => spec.sameAs.get(w) ?? []));
		const options = [...spec.flags.keys()].filter(f => !used.has(f));
		if (last.startsWith("-")) return hits(options);
		const operandGiven = before.some(
			(w, i) => !w.startsWith("-") && !(i > 0 && spec.flags.get(before[i - 1]))
		);
		if (!operandGiven && spec.operand !== undefined) {
			const candidates = await valuesOf(spec.operand);
			if (candidates.length > 0) return hits(candidates);
		}
		return hits(options);
	};
}

/** How long values asked of the cluster are kept: a tab pressed twice asks once. */
const KEEP_MS = 5000;

/** The values asked of the cluster through the actions the commands call (a page each). */
export function clusterValues(broker: ServiceBroker, now = () => Date.now()): ValueSource {
	const kept = new Map<AskedKind, { at: number; values: Promise<string[]> }>();
	const ask = async (kind: AskedKind): Promise<string[]> => {
		if (kind === "job-type") {
			const page: any = await broker.call("job-types.list", { page_size: "1000" });
			return [...new Set<string>(page.results.map((t: any) => String(t.name)))].sort();
		}
		if (kind === "node") {
			const page: any = await broker.call("nodes.status", { page_size: "1000" });
			return page.results.map((s: any) => String(s.node.id));
		}
		const page: any = await broker.call("jobs.list", { status: "QUEUED", page_size: "100" });
		return page.results.map((j: any) => String(j.id));
	};
	return kind => {
		const hit = kept.get(kind);
		if (hit && now() - hit.at < KEEP_MS) return hit.values;
		const values = ask(kind);
		kept.set(kind, { at: now(), values });
		// a failed ask is not kept
		values.catch(() => kept.delete(kind));
		return values;
	};
}
