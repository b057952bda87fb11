import type { ServiceBroker } from "moleculer";
import { ReplArgError } from "./args";

/** What a command's work gets: the broker to call actions through, and where to print. */
export interface CommandContext {
	broker: ServiceBroker;
	print: (text: string) => void;
}

/** Arguments as moleculer-repl passes them: named operands and `options`. */
export type CommandArgs = Record<string, any> & { options?: Record<string, any> };

export interface ReplCommand {
	command: string;
	description: string;
	alias?: string[];
	options?: { option: string; description: string }[];
	/** as moleculer-repl calls it */
	action(broker: ServiceBroker, args: CommandArgs): Promise<void>;
	/** the same, printing through `print` (tests capture it) */
	run(ctx: CommandContext, args: CommandArgs): Promise<void>;
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
		run,
		action: (broker, args) => run({ broker, print: text => console.log(text) }, args)
	};
}
