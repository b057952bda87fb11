import { BadRequestError, FieldError } from "../../../lib/errors";
import { Iso8601Error } from "../../../lib/validation/schema";
import {
	TRIGGER_TYPES,
	checkRuleAgainstInputs,
	isDue,
	parseTriggerRule,
	scheduleSeconds,
	workspaceNameOf
} from "../../../lib/documents/trigger-configuration";
import type { InputEntry } from "../../../lib/documents/types";

function problemOf(fn: () => unknown): { field: string; message: string } {
	try {
		fn();
	} catch (error) {
		expect(error).toBeInstanceOf(FieldError);
		expect((error as BadRequestError).code).toBe(400);
		const field = (error as FieldError).data.field as string;
		return { field, message: (error as Error).message.slice(field.length + 2) };
	}
	throw new Error("expected a FieldError");
}

const opts = { clockProcessors: new Set(["scale-daily-metrics", "scale-job-load"]) };

/** Scale's docs/architecture/triggers.rst ingest example, as a rule body. */
function ingestRule(): any {
	return {
		type: "INGEST",
		name: "my-rule",
		configuration: {
			version: "1.0",
			condition: { media_type: "text/plain", data_types: ["foo", "bar"] },
			data: { input_data_name: "my_file", workspace_name: "my_workspace" }
		}
	};
}

/** Scale's clock example. */
function clockRule(): any {
	return {
		type: "CLOCK",
		name: "scale-daily-metrics",
		configuration: { version: "1.0", event_type: "MY_METRICS", schedule: "PT1H0M0S" }
	};
}

describe("parseTriggerRule", () => {
	it("knows the three rule types", () => {
		expect(TRIGGER_TYPES).toEqual(["INGEST", "PARSE", "CLOCK"]);
	});

	it("accepts Scale's ingest sample, with is_active defaulting to true", () => {
		expect(parseTriggerRule(ingestRule(), opts)).toEqual({
			type: "INGEST",
			name: "my-rule",
			is_active: true,
			configuration: {
				version: "1.0",
				condition: { media_type: "text/plain", data_types: ["foo", "bar"] },
				data: { input_data_name: "my_file", workspace_name: "my_workspace" }
			}
		});
	});

	it("fills the defaults of a parse rule", () => {
		const rule = parseTriggerRule(
			{
				type: "PARSE",
				name: null,
				is_active: false,
				configuration: { data: { input_data_name: "f", workspace_name: "w" } }
			},
			opts
		);
		expect(rule).toEqual({
			type: "PARSE",
			name: "",
			is_active: false,
			configuration: {
				version: "1.0",
				condition: { media_type: "", data_types: [] },
				data: { input_data_name: "f", workspace_name: "w" }
			}
		});
		expect(workspaceNameOf(rule)).toBe("w");
	});

	it("checks the rule body", () => {
		const noType = ingestRule();
		delete noType.type;
		expect(problemOf(() => parseTriggerRule(noType, opts))).toEqual({
			field: "trigger_rule.type",
			message: "is required"
		});
		const badType = ingestRule();
		badType.type = "STRIKE_TRANSFER";
		expect(problemOf(() => parseTriggerRule(badType, opts))).toEqual({
			field: "trigger_rule.type",
			message: "must be one of INGEST, PARSE, CLOCK"
		});
		const noConfig = ingestRule();
		delete noConfig.configuration;
		expect(problemOf(() => parseTriggerRule(noConfig, opts))).toEqual({
			field: "trigger_rule.configuration",
			message: "is required"
		});
		const active = ingestRule();
		active.is_active = "yes";
		expect(problemOf(() => parseTriggerRule(active, opts)).field).toBe(
			"trigger_rule.is_active"
		);
		const extra = ingestRule();
		extra.id = 3;
		expect(problemOf(() => parseTriggerRule(extra, opts))).toEqual({
			field: "trigger_rule.id",
			message: "is not allowed"
		});
		expect(problemOf(() => parseTriggerRule(null, opts, "rule")).field).toBe("rule");
	});

	it("checks an ingest or parse configuration with exact paths", () => {
		const noData = ingestRule();
		delete noData.configuration.data;
		expect(problemOf(() => parseTriggerRule(noData, opts))).toEqual({
			field: "trigger_rule.configuration.data",
			message: "is required"
		});
		const noWorkspace = ingestRule();
		delete noWorkspace.configuration.data.workspace_name;
		expect(problemOf(() => parseTriggerRule(noWorkspace, opts))).toEqual({
			field: "trigger_rule.configuration.data.workspace_name",
			message: "is required"
		});
		const noInput = ingestRule();
		delete noInput.configuration.data.input_data_name;
		expect(problemOf(() => parseTriggerRule(noInput, opts)).field).toBe(
			"trigger_rule.configuration.data.input_data_name"
		);
		const condition = ingestRule();
		condition.configuration.condition.file_name = "x";
		expect(problemOf(() => parseTriggerRule(condition, opts)).field).toBe(
			"trigger_rule.configuration.condition.file_name"
		);
		const dataTypes = ingestRule();
		dataTypes.configuration.condition.data_types = "foo";
		expect(problemOf(() => parseTriggerRule(dataTypes, opts)).field).toBe(
			"trigger_rule.configuration.condition.data_types"
		);
		const version = ingestRule();
		version.configuration.version = "2.0";
		expect(problemOf(() => parseTriggerRule(version, opts))).toEqual({
			field: "trigger_rule.configuration.version",
			message: '"2.0" is an unsupported version (supported: 1.0)'
		});
		// a clock configuration is not an ingest one
		const clockShaped = ingestRule();
		clockShaped.configuration = clockRule().configuration;
		expect(problemOf(() => parseTriggerRule(clockShaped, opts)).field).toMatch(
			/^trigger_rule\.configuration\./
		);
	});

	it("accepts Scale's clock sample", () => {
		const rule = parseTriggerRule(clockRule(), opts);
		expect(rule).toEqual({
			type: "CLOCK",
			name: "scale-daily-metrics",
			is_active: true,
			configuration: { version: "1.0", event_type: "MY_METRICS", schedule: "PT1H0M0S" }
		});
		expect(workspaceNameOf(rule)).toBeNull();
	});

	it("checks a clock configuration", () => {
		const noEvent = clockRule();
		delete noEvent.configuration.event_type;
		expect(problemOf(() => parseTriggerRule(noEvent, opts))).toEqual({
			field: "trigger_rule.configuration.event_type",
			message: "is required"
		});
		const emptyEvent = clockRule();
		emptyEvent.configuration.event_type = "";
		expect(problemOf(() => parseTriggerRule(emptyEvent, opts)).field).toBe(
			"trigger_rule.configuration.event_type"
		);
		const noSchedule = clockRule();
		delete noSchedule.configuration.schedule;
		expect(problemOf(() => parseTriggerRule(noSchedule, opts)).field).toBe(
			"trigger_rule.configuration.schedule"
		);
		const version = clockRule();
		version.configuration.version = "0.9";
		expect(problemOf(() => parseTriggerRule(version, opts)).field).toBe(
			"trigger_rule.configuration.version"
		);
	});

	it("takes schedules of hours, minutes and seconds of one minute or more", () => {
		const withSchedule = (schedule: string) => {
			const rule = clockRule();
			rule.configuration.schedule = schedule;
			return rule;
		};
		expect(parseTriggerRule(withSchedule("PT1M"), opts).configuration).toMatchObject({
			schedule: "PT1M"
		});
		expect(problemOf(() => parseTriggerRule(withSchedule("P1D"), opts))).toEqual({
			field: "trigger_rule.configuration.schedule",
			message:
				'"P1D" has a date part (days, weeks, months or years); a clock schedule takes hours, minutes and seconds only, e.g. PT1H0M0S'
		});
		expect(problemOf(() => parseTriggerRule(withSchedule("PT30S"), opts))).toEqual({
			field: "trigger_rule.configuration.schedule",
			message: '"PT30S" is shorter than one minute, the clock\'s smallest slice'
		});
		expect(problemOf(() => parseTriggerRule(withSchedule("hourly"), opts))).toEqual({
			field: "trigger_rule.configuration.schedule",
			message: '"hourly" is not an ISO-8601 duration'
		});
	});

	it("requires a clock rule's name to be a clock event processor", () => {
		const unknown = clockRule();
		unknown.name = "my-metrics";
		expect(problemOf(() => parseTriggerRule(unknown, opts))).toEqual({
			field: "trigger_rule.name",
			message:
				'"my-metrics" is not a clock event processor (known: "scale-daily-metrics", "scale-job-load")'
		});
		const unnamed = clockRule();
		delete unnamed.name;
		expect(problemOf(() => parseTriggerRule(unnamed, opts))).toEqual({
			field: "trigger_rule.name",
			message:
				'is required for a CLOCK rule: the clock event processor to run (known: "scale-daily-metrics", "scale-job-load")'
		});
		expect(
			problemOf(() => parseTriggerRule(clockRule(), { clockProcessors: new Set() })).field
		).toBe("trigger_rule.name");
	});
});

describe("scheduleSeconds", () => {
	it("measures hour, minute and second schedules", () => {
		expect(scheduleSeconds("PT1H0M0S")).toBe(3600);
		expect(scheduleSeconds("PT1M")).toBe(60);
		expect(scheduleSeconds("PT1H30M")).toBe(5400);
		expect(scheduleSeconds("PT1.5H")).toBe(5400);
		expect(scheduleSeconds("PT24H")).toBe(86400);
	});

	it("refuses date parts, slices under a minute or over a day, and non-durations", () => {
		for (const bad of [
			"P1D",
			"P1DT1H",
			"P1W",
			"P1M",
			"PT30S",
			"PT59S",
			"PT0S",
			"PT25H",
			"PT",
			"1H"
		]) {
			expect(() => scheduleSeconds(bad)).toThrow(Iso8601Error);
		}
	});
});

describe("isDue", () => {
	const at = (text: string) => new Date(text);

	it("fires at the top of the hour even when the last event ran late", () => {
		const late = at("2024-03-05T11:07:12Z");
		expect(isDue("PT1H0M0S", late, at("2024-03-05T11:30:00Z"))).toBe(false);
		expect(isDue("PT1H0M0S", late, at("2024-03-05T11:59:59Z"))).toBe(false);
		expect(isDue("PT1H0M0S", late, at("2024-03-05T12:00:00Z"))).toBe(true);
		expect(isDue("PT1H0M0S", late, at("2024-03-05T12:00:40Z"))).toBe(true);
	});

	it("does not fire twice in one slice", () => {
		const onTime = at("2024-03-05T12:00:00.300Z");
		expect(isDue("PT1H0M0S", onTime, at("2024-03-05T12:00:50Z"))).toBe(false);
		expect(isDue("PT1H0M0S", onTime, at("2024-03-05T12:59:00Z"))).toBe(false);
		expect(isDue("PT1H0M0S", onTime, at("2024-03-05T13:00:00Z"))).toBe(true);
	});

	it("counts to the minute, the clock's tick", () => {
		const last = at("2024-03-05T10:00:30Z");
		expect(isDue("PT1M", last, at("2024-03-05T10:00:59Z"))).toBe(false);
		expect(isDue("PT1M", last, at("2024-03-05T10:01:00Z"))).toBe(true);
	});

	it("catches up after a missed tick", () => {
		expect(isDue("PT1H", at("2024-03-05T10:00:01Z"), at("2024-03-05T11:05:00Z"))).toBe(true);
		expect(isDue("PT1H", at("2024-03-01T10:00:01Z"), at("2024-03-05T11:05:00Z"))).toBe(true);
	});

	it("starts the slices again at midnight (UTC)", () => {
		const last = at("2024-03-05T23:00:02Z");
		expect(isDue("PT1H", last, at("2024-03-05T23:59:00Z"))).toBe(false);
		expect(isDue("PT1H", last, at("2024-03-06T00:00:00Z"))).toBe(true);
		// 7 hours do not divide a day: slices at 00:00, 07:00, 14:00, 21:00, then 00:00 again
		const seven = at("2024-03-05T21:00:01Z");
		expect(isDue("PT7H", seven, at("2024-03-05T23:59:00Z"))).toBe(false);
		expect(isDue("PT7H", seven, at("2024-03-06T00:00:00Z"))).toBe(true);
		expect(isDue("PT7H", at("2024-03-06T00:00:01Z"), at("2024-03-06T06:59:00Z"))).toBe(false);
		expect(isDue("PT7H", at("2024-03-06T00:00:01Z"), at("2024-03-06T07:00:00Z"))).toBe(true);
		// a daily schedule fires at midnight
		const daily = at("2024-03-05T00:00:05Z");
		expect(isDue("PT24H", daily, at("2024-03-05T23:59:00Z"))).toBe(false);
		expect(isDue("PT24H", daily, at("2024-03-06T00:00:00Z"))).toBe(true);
	});

	it("runs a rule that never ran at the end of the day's first slice, as Scale", () => {
		expect(isDue("PT1H", null, at("2024-03-05T00:30:00Z"))).toBe(false);
		expect(isDue("PT1H", null, at("2024-03-05T01:00:00Z"))).toBe(true);
		expect(isDue("PT1H", null, at("2024-03-05T17:42:00Z"))).toBe(true);
		expect(isDue("PT24H", null, at("2024-03-05T00:30:00Z"))).toBe(true);
	});

	it("refuses a bad schedule", () => {
		expect(() => isDue("P1D", null, new Date())).toThrow(Iso8601Error);
	});
});

describe("checkRuleAgainstInputs", () => {
	const inputs: InputEntry[] = [
		{ name: "my_file", type: "file", required: true, media_types: ["text/plain"] },
		{ name: "any_files", type: "files", required: false, media_types: [] },
		{ name: "label", type: "property", required: false }
	];
	const rule = (change: (doc: any) => void = () => undefined) => {
		const doc = ingestRule();
		change(doc);
		return parseTriggerRule(doc, opts);
	};

	it("accepts a rule feeding a file input of its media type", () => {
		expect(checkRuleAgainstInputs(rule(), inputs)).toEqual([]);
	});

	it("accepts a files input that takes any media type", () => {
		const toFiles = rule(d => (d.configuration.data.input_data_name = "any_files"));
		expect(checkRuleAgainstInputs(toFiles, [inputs[1], inputs[2]])).toEqual([]);
	});

	it("refuses an input the job type or recipe does not have", () => {
		const other = rule(d => (d.configuration.data.input_data_name = "other"));
		expect(problemOf(() => checkRuleAgainstInputs(other, inputs))).toEqual({
			field: "trigger_rule.configuration.data.input_data_name",
			message: '"other" names no input (inputs: "my_file", "any_files", "label")'
		});
		expect(
			problemOf(() => checkRuleAgainstInputs(other, [], "import.job_types[0].trigger_rule"))
		).toEqual({
			field: "import.job_types[0].trigger_rule.configuration.data.input_data_name",
			message: '"other" names no input (inputs: none)'
		});
	});

	it("refuses a property input", () => {
		const toProperty = rule(d => (d.configuration.data.input_data_name = "label"));
		expect(problemOf(() => checkRuleAgainstInputs(toProperty, inputs))).toEqual({
			field: "trigger_rule.configuration.data.input_data_name",
			message:
				'"label" is a property input; the rule passes a file (name a file or files input)'
		});
	});

	it("refuses when another input is required, as Scale", () => {
		const toFiles = rule(d => (d.configuration.data.input_data_name = "any_files"));
		expect(problemOf(() => checkRuleAgainstInputs(toFiles, inputs))).toEqual({
			field: "trigger_rule",
			message:
				'input "my_file" is required and was not provided: the rule feeds only "any_files"'
		});
	});

	it("warns when the input does not accept the rule's media type", () => {
		const image = rule(d => (d.configuration.condition.media_type = "image/png"));
		expect(checkRuleAgainstInputs(image, inputs)).toEqual([
			{ id: "media_type", details: "Invalid media type for data input: my_file -> image/png" }
		]);
		const any = rule(d => delete d.configuration.condition);
		expect(checkRuleAgainstInputs(any, inputs)).toEqual([
			{
				id: "media_type",
				details: "Invalid media type for data input: my_file -> application/octet-stream"
			}
		]);
	});

	it("has nothing to check for a clock rule", () => {
		expect(checkRuleAgainstInputs(parseTriggerRule(clockRule(), opts), inputs)).toEqual([]);
	});
});
