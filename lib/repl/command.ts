import type { ServiceBroker } from "moleculer";
import { ReplArgError } from "./args";
import type { CompletableCommand } from "./complete";

/** What a command's work gets: the broker to call actions through, and where to print. */
export interface CommandContext {
	broker: ServiceBroker;
	/** a line */
	print: (text: string) => void;
	/** text as it is (a followed log's bytes) */
	write: (text: string) => void;
}

/** Arguments as moleculer-repl passes them: named operands and `options`. */
export type CommandArgs = Record<string, any> & { options?: Record<string, any> };

export interface ReplCommand extends CompletableCommand {
	command: string;
	description: string;
	alias?: string[];
	options?: { option: string; description: string }[];
	/** as moleculer-repl calls it */
	action(broker: ServiceBroker, args: CommandArgs): Promise<void>;
	/** moleculer-repl's preAction hook: the command's arguments, its last variadic one whole */
	parse(this: unknown, command: ParsedCommand): void;
	/** the same, printing through `print` (tests capture it) */
	run(ctx: CommandContext, args: CommandArgs): Promise<void>;
}

/** What moleculer-repl's parse hook is given: commander's command, as it parsed the line. */
export interface ParsedCommand {
	args: string[];
	_args: { name(): string; variadic: boolean }[];
	parseOptions(args: string[]): { operands: string[]; unknown: string[] };
	opts(): Record<string, unknown>;
	params?: CommandArgs;
}

/**
 * The arguments of a command line as the commands take them: each named operand, a variadic one
 * (`<ids...>`, `[reason...]`) with every word left (moleculer-repl's own parser kept the first:
 * `node-pause 3 disk full` paused for "disk"), and the options.
 */
export function parseArguments(this: unknown, command: ParsedCommand): void {
	const { operands } = command.parseOptions(command.args);
	const values: Record<string, unknown> = {};
	command._args.forEach((arg, i) => {
		if (arg.variadic) values[arg.name()] = operands.slice(i);
		else if (i < operands.length) values[arg.name()] = operands[i];
	});
	command.params = { ...values, options: { ...command.opts() } };
}

/**
 * A command whose bad arguments print their message and call nothing, and whose failed calls
 * print the control plane's answer, never a stack trace.
 */
export function defineCommand(def: {
	command: string;
	description: string;
	alias?: string[];
	options?: { option: string; description: string }[];
	/** what tab completes after it (lib/repl/complete.ts) */
	values?: CompletableCommand["values"];
	run: (ctx: CommandContext, args: CommandArgs) => Promise<void>;
}): ReplCommand {
	const run = async (ctx: CommandContext, args: CommandArgs) => {
		try {
			await def.run(ctx, args ?? {});
		} catch (err) {
			if (err instanceof ReplArgError) ctx.print(`error: ${err.message}`);
			else ctx.print(`failed: ${(err as Error)?.message ?? err}`);
		}
	};
	return {
		command: def.command,
		description: def.description,
		alias: def.alias,
		options: def.options,
		values: def.values,
		parse: parseArguments,
		run,
		action: (broker, args) =>
			run(
				{
					broker,
					print: text => console.log(text),
					write: text => void process.stdout.write(text)
				},
				args
			)
	};
}
