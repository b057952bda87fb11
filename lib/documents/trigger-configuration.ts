import { FieldError } from "../errors";
import { Iso8601Error, parseDuration } from "../validation/schema";
import { assertSchema, compileChecker, checkStorableText } from "../validation/schema";
import type { InputEntry, Warning } from "./types";

/**
 * Trigger rules and their configurations 1.0 (Scale's docs/architecture/triggers.rst,
 * ingest/triggers/configuration/ingest_trigger_rule.py, source/triggers/configuration/
 * parse_trigger_rule.py and job/clock.py).
 */
export const TRIGGER_TYPES = ["INGEST", "PARSE", "CLOCK"] as const;
export type TriggerType = (typeof TRIGGER_TYPES)[number];

export const TRIGGER_CONFIGURATION_VERSION = "1.0";

/** What Scale assumes a file is when a rule names no media type (storage/media_type.py). */
const UNKNOWN_MEDIA_TYPE = "application/octet-stream";

/** Ingest and parse rule configuration, normalised (version and condition defaults filled). */
export interface FileTriggerConfiguration {
	version: "1.0";
	condition: { media_type: string; data_types: string[] };
	data: { input_data_name: string; workspace_name: string };
}

export interface ClockTriggerConfiguration {
	version: "1.0";
	event_type: string;
	schedule: string;
}

interface RuleCommon {
	/** "" when not given */
	name: string;
	is_active: boolean;
}

export type FileTriggerRuleSpec = RuleCommon & {
	type: "INGEST" | "PARSE";
	configuration: FileTriggerConfiguration;
};
export type ClockTriggerRuleSpec = RuleCommon & {
	type: "CLOCK";
	configuration: ClockTriggerConfiguration;
};
export type TriggerRuleSpec = FileTriggerRuleSpec | ClockTriggerRuleSpec;

const RULE_SCHEMA = {
	type: "object",
	required: ["type", "configuration"],
	additionalProperties: false,
	properties: {
		type: { type: "string", enum: [...TRIGGER_TYPES] },
		name: { type: ["string", "null"], maxLength: 50 },
		is_active: { type: "boolean" },
		configuration: { type: "object" }
	}
};

// Scale's INGEST_TRIGGER_SCHEMA (PARSE_TRIGGER_SCHEMA is the same).
const FILE_CONFIGURATION_SCHEMA = {
	type: "object",
	required: ["data"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		condition: {
			type: "object",
			additionalProperties: false,
			properties: {
				media_type: { type: "string" },
				data_types: { type: "array", items: { type: "string" } }
			}
		},
		data: {
			type: "object",
			required: ["input_data_name", "workspace_name"],
			additionalProperties: false,
			properties: {
				input_data_name: { type: "string", minLength: 1 },
				workspace_name: { type: "string", minLength: 1 }
			}
		}
	}
};

const CLOCK_CONFIGURATION_SCHEMA = {
	type: "object",
	required: ["event_type", "schedule"],
	additionalProperties: false,
	properties: {
		version: { type: "string", maxLength: 50 },
		event_type: { type: "string", minLength: 1, maxLength: 50 },
		schedule: { type: "string", minLength: 1 }
	}
};

const checkRule = compileChecker(RULE_SCHEMA);
const checkFileConfiguration = compileChecker(FILE_CONFIGURATION_SCHEMA);
const checkClockConfiguration = compileChecker(CLOCK_CONFIGURATION_SCHEMA);

/**
 * Parses a trigger rule body `{type, name?, is_active?, configuration}` and its configuration
 * by type. A CLOCK rule's name must be one of `clockProcessors`. Answers a normalised copy;
 * throws FieldError, e.g. `trigger_rule.configuration.schedule`. Whether the workspace exists
 * (workspaceNameOf) and whether the rule fits the job type or recipe (checkRuleAgainstInputs)
 * are the caller's next steps.
 */
export function parseTriggerRule(
	doc: unknown,
	opts: { clockProcessors: ReadonlySet<string> },
	field = "trigger_rule"
): TriggerRuleSpec {
	assertSchema(checkRule, doc, field);
	checkStorableText(doc, field);
	const given = doc as {
		type: TriggerType;
		name?: string | null;
		is_active?: boolean;
		configuration: Record<string, unknown>;
	};
	const common: RuleCommon = { name: given.name ?? "", is_active: given.is_active ?? true };
	const at = `${field}.configuration`;
	const version = given.configuration.version ?? TRIGGER_CONFIGURATION_VERSION;
	if (given.type === "CLOCK") {
		assertSchema(checkClockConfiguration, given.configuration, at);
		checkVersion(version, at);
		const config = given.configuration as { event_type: string; schedule: string };
		try {
			scheduleSeconds(config.schedule);
		} catch (error) {
			if (error instanceof Iso8601Error)
				throw new FieldError(`${at}.schedule`, error.message);
			throw error;
		}
		if (!opts.clockProcessors.has(common.name)) {
			const known = [...opts.clockProcessors].map(n => `"${n}"`).join(", ") || "none";
			throw new FieldError(
				`${field}.name`,
				common.name
					? `"${common.name}" is not a clock event processor (known: ${known})`
					: `is required for a CLOCK rule: the clock event processor to run (known: ${known})`
			);
		}
		return {
			type: "CLOCK",
			...common,
			configuration: {
				version: TRIGGER_CONFIGURATION_VERSION,
				event_type: config.event_type,
				schedule: config.schedule
			}
		};
	}
	assertSchema(checkFileConfiguration, given.configuration, at);
	checkVersion(version, at);
	const config = given.configuration as {
		condition?: { media_type?: string; data_types?: string[] };
		data: { input_data_name: string; workspace_name: string };
	};
	return {
		type: given.type,
		...common,
		configuration: {
			version: TRIGGER_CONFIGURATION_VERSION,
			condition: {
				media_type: config.condition?.media_type ?? "",
				data_types: [...(config.condition?.data_types ?? [])]
			},
			data: {
				input_data_name: config.data.input_data_name,
				workspace_name: config.data.workspace_name
			}
		}
	};
}

function checkVersion(version: unknown, at: string): void {
	if (version !== TRIGGER_CONFIGURATION_VERSION) {
		throw new FieldError(
			`${at}.version`,
			`"${version}" is an unsupported version (supported: ${TRIGGER_CONFIGURATION_VERSION})`
		);
	}
}

/**
 * Checks an INGEST or PARSE rule against the inputs of the job type's interface or the recipe
 * type's definition it triggers (Scale's validate_trigger_for_job / _for_recipe): the rule feeds
 * one file to `input_data_name`, which must be a file or files input, and no other input may be
 * required. Answers `media_type` warnings when the input accepts only some media types and the
 * rule's media type (application/octet-stream when it names none, as in Scale) is not one of
 * them. A CLOCK rule feeds no input: no checks, no warnings.
 */
export function checkRuleAgainstInputs(
	rule: TriggerRuleSpec,
	inputs: InputEntry[],
	field = "trigger_rule"
): Warning[] {
	if (rule.type === "CLOCK") return [];
	const { input_data_name: name } = rule.configuration.data;
	const at = `${field}.configuration.data.input_data_name`;
	const input = inputs.find(i => i.name === name);
	if (!input) {
		const known = inputs.map(i => `"${i.name}"`).join(", ") || "none";
		throw new FieldError(at, `"${name}" names no input (inputs: ${known})`);
	}
	if (input.type === "property") {
		throw new FieldError(
			at,
			`"${name}" is a property input; the rule passes a file (name a file or files input)`
		);
	}
	const unfed = inputs.find(i => i.required && i.name !== name);
	if (unfed) {
		throw new FieldError(
			field,
			`input "${unfed.name}" is required and was not provided: the rule feeds only "${name}"`
		);
	}
	const mediaType = rule.configuration.condition.media_type || UNKNOWN_MEDIA_TYPE;
	const accepted = input.media_types ?? [];
	if (accepted.length && !accepted.includes(mediaType)) {
		return [
			{
				id: "media_type",
				details: `Invalid media type for data input: ${name} -> ${mediaType}`
			}
		];
	}
	return [];
}

/** The workspace that stores what an INGEST or PARSE rule's job or recipe makes; null for CLOCK. */
export function workspaceNameOf(rule: TriggerRuleSpec): string | null {
	return rule.type === "CLOCK" ? null : rule.configuration.data.workspace_name;
}

const NUMBER = "(\\d+(?:[.,]\\d+)?)";
const TIME_ONLY = new RegExp(`^PT(?:${NUMBER}H)?(?:${NUMBER}M)?(?:${NUMBER}S)?$`);
const DAY_SECONDS = 86_400;

/**
 * The length in seconds of a clock schedule: an ISO-8601 duration of hours, minutes and seconds
 * only (PT1H0M0S), at least one minute (the clock's smallest slice) and at most a day (slices
 * count from the start of each day). Throws Iso8601Error saying what is wrong.
 */
export function scheduleSeconds(schedule: string): number {
	parseDuration(schedule); // throws for anything that is not an ISO-8601 duration
	const match = TIME_ONLY.exec(schedule);
	if (!match) {
		throw new Iso8601Error(
			schedule,
			"has a date part (days, weeks, months or years); a clock schedule takes hours, minutes " +
				"and seconds only, e.g. PT1H0M0S"
		);
	}
	const [h, m, s] = match.slice(1).map(part => Number((part ?? "0").replace(",", ".")));
	const seconds = h * 3600 + m * 60 + s;
	if (seconds < 60) {
		throw new Iso8601Error(schedule, "is shorter than one minute, the clock's smallest slice");
	}
	if (seconds > DAY_SECONDS) {
		throw new Iso8601Error(
			schedule,
			"is longer than a day; schedules are sliced from the start of each day"
		);
	}
	return seconds;
}

/**
 * Whether a clock rule with this schedule is due at `now`, given when its last event occurred.
 * Slices count from the start of each day (UTC), not from the last event: the rule is due once
 * the latest slice start at or before `now` (to the minute, the clock's tick) is after the last
 * event, so an hourly rule that last ran at 11:07 fires again at 12:00, and a day's first slice
 * starts at midnight. A rule that never ran waits for the end of the day's first slice (Scale's
 * job/clock.py); a rule whose schedule is a whole day runs at once.
 */
export function isDue(schedule: string, lastOccurred: Date | null, now: Date): boolean {
	const sliceMs = scheduleSeconds(schedule) * 1000;
	const current = Math.floor(now.getTime() / 60_000) * 60_000;
	const dayStart = Math.floor(current / (DAY_SECONDS * 1000)) * DAY_SECONDS * 1000;
	if (!lastOccurred) {
		return sliceMs >= DAY_SECONDS * 1000 || dayStart + sliceMs <= current;
	}
	const sliceStart = dayStart + Math.floor((current - dayStart) / sliceMs) * sliceMs;
	return lastOccurred.getTime() < sliceStart;
}
