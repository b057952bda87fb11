import { FieldError } from "../../../lib/errors";
import {
	parseJobInterface,
	placeholders,
	splitCommandArguments,
	substituteArguments
} from "../../../lib/documents/job-interface";

/** The field and message of the FieldError `fn` throws (a 400). */
function fieldErrorOf(fn: () => unknown): { field: string; message: string } {
	try {
		fn();
	} catch (error) {
		expect(error).toBeInstanceOf(FieldError);
		const e = error as FieldError;
		expect(e.code).toBe(400);
		const field = (e.data as { field: string }).field;
		expect(e.message.startsWith(`${field}: `)).toBe(true);
		return { field, message: e.message.slice(field.length + 2) };
	}
	throw new Error("expected a FieldError");
}

/** Scale's docs/architecture/jobs/job_interface.rst example. */
const MAKE_GEOTIFF = {
	version: "1.0",
	command: "python make_geotiff.py",
	command_arguments: "${image} ${georeference_data} ${job_output_dir}",
	input_data: [
		{ name: "image", type: "file", media_types: ["image/png"] },
		{ name: "georeference_data", type: "file", media_types: ["text/csv"] }
	],
	output_data: [{ name: "geo_image", type: "file", media_type: "image/tiff" }]
};

function withArgs(commandArguments: string, extra: Record<string, unknown> = {}) {
	return {
		command: "run",
		command_arguments: commandArguments,
		input_data: [
			{ name: "input_file", type: "file" },
			{ name: "my input", type: "property" },
			{ name: "opt", type: "property", required: false }
		],
		...extra
	};
}

describe("parseJobInterface: valid documents", () => {
	it("reads Scale's make_geotiff example and fills defaults", () => {
		expect(parseJobInterface(MAKE_GEOTIFF)).toEqual({
			version: "1.0",
			command: "python make_geotiff.py",
			command_arguments: "${image} ${georeference_data} ${job_output_dir}",
			input_data: [
				{ name: "image", type: "file", required: true, media_types: ["image/png"] },
				{
					name: "georeference_data",
					type: "file",
					required: true,
					media_types: ["text/csv"]
				}
			],
			output_data: [
				{ name: "geo_image", type: "file", required: true, media_type: "image/tiff" }
			]
		});
	});

	it("defaults version, input_data, output_data, required and media_types", () => {
		expect(parseJobInterface({ command: "true", command_arguments: "" })).toEqual({
			version: "1.0",
			command: "true",
			command_arguments: "",
			input_data: [],
			output_data: []
		});
		const parsed = parseJobInterface({
			command: "run",
			command_arguments: "${a} ${b} ${c}",
			input_data: [
				{ name: "a", type: "property" },
				{ name: "b", type: "file", required: false },
				{ name: "c", type: "files" }
			],
			output_data: [
				{ name: "d", type: "files", required: false },
				{ name: "e", type: "file" }
			]
		});
		expect(parsed.input_data).toEqual([
			{ name: "a", type: "property", required: true },
			{ name: "b", type: "file", required: false, media_types: [] },
			{ name: "c", type: "files", required: true, media_types: [] }
		]);
		expect(parsed.output_data).toEqual([
			{ name: "d", type: "files", required: false },
			{ name: "e", type: "file", required: true }
		]);
	});

	it("does not change the document it is given", () => {
		const doc = {
			command: "x",
			command_arguments: "",
			input_data: [{ name: "a", type: "file" }]
		};
		const copy = structuredClone(doc);
		parseJobInterface(doc);
		expect(doc).toEqual(copy);
	});

	it("keeps shared_resources as given (Scale 3.0 samples carry them)", () => {
		const parsed = parseJobInterface({
			command: "x",
			command_arguments: "",
			shared_resources: [{ name: "db", type: "postgres" }]
		});
		expect(parsed.shared_resources).toEqual([{ name: "db", type: "postgres" }]);
	});

	it("accepts names of 255 allowed characters, with spaces, _ and -", () => {
		const name = "a".repeat(255);
		expect(
			parseJobInterface({
				command: "x",
				command_arguments: "${Name 1_-x}",
				input_data: [
					{ name: "Name 1_-x", type: "property" },
					{ name, type: "file" }
				]
			}).input_data.map(i => i.name)
		).toEqual(["Name 1_-x", name]);
	});

	it.each([
		"${-f :input_file}",
		"${--in:my input}",
		"--out=${job_output_dir}/x",
		"${-o :job_output_dir}",
		"'${input_file}'",
		'"${my input}" ${opt}',
		""
	])("accepts command_arguments %j", args => {
		expect(parseJobInterface(withArgs(args)).command_arguments).toBe(args);
	});
});

describe("parseJobInterface: problems", () => {
	it.each([
		[null, "interface", "must be object"],
		[[], "interface", "must be object"],
		[{ command_arguments: "" }, "interface.command", "is required"],
		[{ command: "x" }, "interface.command_arguments", "is required"],
		[
			{ command: "", command_arguments: "" },
			"interface.command",
			"must NOT have fewer than 1 characters"
		],
		[{ command: 5, command_arguments: "" }, "interface.command", "must be string"],
		[
			{ command: "x", command_arguments: null },
			"interface.command_arguments",
			"must be string"
		],
		[{ command: "x", command_arguments: "", extra: 1 }, "interface.extra", "is not allowed"],
		[
			{ command: "x", command_arguments: "", version: 1 },
			"interface.version",
			"must be string"
		],
		[
			{ command: "x", command_arguments: "", input_data: {} },
			"interface.input_data",
			"must be array"
		],
		[
			{ command: "x", command_arguments: "", output_data: "a" },
			"interface.output_data",
			"must be array"
		]
	])("refuses %j at %s", (doc, field, message) => {
		expect(fieldErrorOf(() => parseJobInterface(doc))).toEqual({ field, message });
	});

	it("refuses a blank command", () => {
		expect(
			fieldErrorOf(() => parseJobInterface({ command: "  ", command_arguments: "" }))
		).toEqual({
			field: "interface.command",
			message: "must not be blank"
		});
	});

	it.each(["2.0", "1", "1.1", ""])("refuses version %j", version => {
		const problem = fieldErrorOf(() => parseJobInterface({ ...MAKE_GEOTIFF, version }));
		expect(problem.field).toBe("interface.version");
		expect(problem.message).toContain(`"${version}" is an unsupported version`);
	});

	it("names the field under the given prefix", () => {
		expect(
			fieldErrorOf(() => parseJobInterface({ command: "x" }, "job_type.interface")).field
		).toBe("job_type.interface.command_arguments");
	});

	const inputs = (second: Record<string, unknown>) => ({
		command: "x",
		command_arguments: "",
		input_data: [{ name: "a", type: "file" }, second]
	});
	const outputs = (second: Record<string, unknown>) => ({
		command: "x",
		command_arguments: "",
		output_data: [{ name: "a", type: "file" }, second]
	});

	it.each([
		[inputs({ type: "file" }), "interface.input_data[1].name", "is required"],
		[inputs({ name: "b" }), "interface.input_data[1].type", "is required"],
		[
			inputs({ name: "b", type: "image" }),
			"interface.input_data[1].type",
			"must be one of property, file, files"
		],
		[
			inputs({ name: "b", type: "file", required: "yes" }),
			"interface.input_data[1].required",
			"must be boolean"
		],
		[
			inputs({ name: "b", type: "file", media_types: "image/png" }),
			"interface.input_data[1].media_types",
			"must be array"
		],
		[
			inputs({ name: "b", type: "file", media_types: [1] }),
			"interface.input_data[1].media_types[0]",
			"must be string"
		],
		[
			inputs({ name: "b", type: "file", media_type: "x" }),
			"interface.input_data[1].media_type",
			"is not allowed"
		],
		[
			inputs({ name: "b", type: "property", media_types: [] }),
			"interface.input_data[1].media_types",
			"is only allowed on file and files inputs"
		],
		[outputs({ type: "file" }), "interface.output_data[1].name", "is required"],
		[outputs({ name: "b" }), "interface.output_data[1].type", "is required"],
		[
			outputs({ name: "b", type: "property" }),
			"interface.output_data[1].type",
			"must be one of file, files"
		],
		[
			outputs({ name: "b", type: "file", required: 1 }),
			"interface.output_data[1].required",
			"must be boolean"
		],
		[
			outputs({ name: "b", type: "file", media_type: ["x"] }),
			"interface.output_data[1].media_type",
			"must be string"
		],
		[
			outputs({ name: "b", type: "file", media_types: [] }),
			"interface.output_data[1].media_types",
			"is not allowed"
		]
	])("refuses a bad entry (%#) at %s", (doc, field, message) => {
		expect(fieldErrorOf(() => parseJobInterface(doc))).toEqual({ field, message });
	});

	it.each(["", "a".repeat(256), "a.b", "a/b", "é", "a\tb", "a\nb", "${x}", "a:b"])(
		"refuses the name %j in inputs and outputs",
		name => {
			const message = "must be 1 to 255 letters, digits, spaces, underscores or hyphens";
			expect(fieldErrorOf(() => parseJobInterface(inputs({ name, type: "file" })))).toEqual({
				field: "interface.input_data[1].name",
				message
			});
			expect(fieldErrorOf(() => parseJobInterface(outputs({ name, type: "file" })))).toEqual({
				field: "interface.output_data[1].name",
				message
			});
		}
	);

	it("refuses a name used twice among inputs", () => {
		expect(
			fieldErrorOf(() => parseJobInterface(inputs({ name: "a", type: "property" })))
		).toEqual({
			field: "interface.input_data[1].name",
			message: '"a" is already the name of interface.input_data[0]'
		});
	});

	it("refuses a name used twice among outputs", () => {
		expect(
			fieldErrorOf(() => parseJobInterface(outputs({ name: "a", type: "files" })))
		).toEqual({
			field: "interface.output_data[1].name",
			message: '"a" is already the name of interface.output_data[0]'
		});
	});

	it("refuses an output named like an input", () => {
		const doc = {
			command: "x",
			command_arguments: "",
			input_data: [
				{ name: "x", type: "property" },
				{ name: "image", type: "file" }
			],
			output_data: [{ name: "image", type: "file" }]
		};
		expect(fieldErrorOf(() => parseJobInterface(doc))).toEqual({
			field: "interface.output_data[0].name",
			message: '"image" is already the name of interface.input_data[1]'
		});
	});

	it("refuses a shared resource named like an input (as Scale does)", () => {
		const doc = {
			command: "x",
			command_arguments: "",
			input_data: [{ name: "db", type: "property" }],
			shared_resources: [{ name: "db", type: "postgres" }]
		};
		expect(fieldErrorOf(() => parseJobInterface(doc)).field).toBe(
			"interface.shared_resources[0].name"
		);
	});

	it("refuses an input named job_output_dir", () => {
		expect(
			fieldErrorOf(() =>
				parseJobInterface(inputs({ name: "job_output_dir", type: "property" }))
			)
		).toEqual({
			field: "interface.input_data[1].name",
			message: '"job_output_dir" is reserved for the output directory placeholder'
		});
	});

	it.each([
		["${unknown}", "${unknown}"],
		["${input_file} ${geo_image}", "${geo_image}"],
		["${-f :nope}", "${-f :nope}"],
		["${--in:my_input}", "${--in:my_input}"],
		["${}", "${}"],
		["${-f:}", "${-f:}"],
		["${ input_file}", "${ input_file}"],
		["${job_output_dir }", "${job_output_dir }"],
		["${JOB_OUTPUT_DIR}", "${JOB_OUTPUT_DIR}"],
		["'${shared}'", "${shared}"],
		['$"{nope}"', "${nope}"]
	])("refuses command_arguments %j naming %s", (args, raw) => {
		const doc = withArgs(args, {
			output_data: [{ name: "geo_image", type: "file" }],
			shared_resources: [{ name: "shared", type: "db" }]
		});
		const problem = fieldErrorOf(() => parseJobInterface(doc));
		expect(problem.field).toBe("interface.command_arguments");
		expect(problem.message).toContain(`the placeholder ${raw} names no input`);
	});

	it.each([
		["'unclosed", "has an unclosed single quote at character 1"],
		['-c "exit 3', "has an unclosed double quote at character 4"],
		['"a\\"', "has an unclosed double quote at character 1"],
		["${input_file", 'has an unclosed "${" at character 1']
	])("refuses command_arguments %j that cannot be split", (args, message) => {
		expect(fieldErrorOf(() => parseJobInterface(withArgs(args)))).toEqual({
			field: "interface.command_arguments",
			message
		});
	});

	it("refuses text PostgreSQL cannot store", () => {
		expect(
			fieldErrorOf(() => parseJobInterface({ command: "a\0b", command_arguments: "" }))
		).toEqual({
			field: "interface.command",
			message: "must not contain NUL characters"
		});
	});
});

describe("splitCommandArguments", () => {
	it.each([
		["", []],
		["   \t\n ", []],
		["a b  c", ["a", "b", "c"]],
		['-c "exit 3"', ["-c", "exit 3"]],
		["-c 'exit 3'", ["-c", "exit 3"]],
		["'a \"b\" \\c'", ['a "b" \\c']],
		['"a \'b\' \\"c\\" \\\\ \\$ \\` \\n"', ["a 'b' \"c\" \\ $ ` \\n"]],
		["a\\ b c", ["a b", "c"]],
		["\\'x\\\"", ["'x\""]],
		['""', [""]],
		["'' x", ["", "x"]],
		['a""b', ["ab"]],
		["pre'mid dle'\"post\"", ["premid dlepost"]],
		["line\\\ncontinued", ["linecontinued"]],
		['"two\\\nlines"', ["twolines"]],
		["a\\", ["a\\"]],
		["x;y | z > f # c", ["x;y", "|", "z", ">", "f", "#", "c"]],
		["$HOME `cmd` $(cmd) *", ["$HOME", "`cmd`", "$(cmd)", "*"]],
		["${-f :input file} ${job_output_dir}", ["${-f :input file}", "${job_output_dir}"]],
		['"${my input}" x${-f :a b}y', ["${my input}", "x${-f :a b}y"]],
		['"${a"b}"', ['${a"b}']],
		["'${a b}'", ["${a b}"]],
		["$ {x} $", ["$", "{x}", "$"]]
	])("splits %j", (text, words) => {
		expect(splitCommandArguments(text)).toEqual(words);
	});

	it("throws a FieldError on the given field", () => {
		expect(
			fieldErrorOf(() => splitCommandArguments("'x", "job_type.interface.command_arguments"))
		).toEqual({
			field: "job_type.interface.command_arguments",
			message: "has an unclosed single quote at character 1"
		});
		expect(fieldErrorOf(() => splitCommandArguments('a "b')).field).toBe("command_arguments");
	});
});

describe("placeholders", () => {
	it("finds each placeholder with its flag and name", () => {
		expect(
			placeholders(
				"${a} x${-f :input_file}y ${--in:my input} ${a:b:c} ${ :d} ${job_output_dir}"
			)
		).toEqual([
			{ raw: "${a}", flag: null, name: "a" },
			{ raw: "${-f :input_file}", flag: "-f", name: "input_file" },
			{ raw: "${--in:my input}", flag: "--in", name: "my input" },
			{ raw: "${a:b:c}", flag: "a:b", name: "c" },
			{ raw: "${ :d}", flag: null, name: "d" },
			{ raw: "${job_output_dir}", flag: null, name: "job_output_dir" }
		]);
	});

	it("finds nothing in text without ${...}", () => {
		expect(placeholders("$a {b} $ {c} ${unclosed")).toEqual([]);
	});
});

describe("substituteArguments", () => {
	const values = {
		inputs: {
			input_file: "/in/input_file/a.png",
			"my input": "two words",
			opt: null,
			dir: "/in/dir"
		},
		jobOutputDir: "/out"
	};
	const run = (args: string) => substituteArguments(splitCommandArguments(args), values);

	it.each([
		["${input_file} ${job_output_dir}", ["/in/input_file/a.png", "/out"]],
		["${my input}", ["two words"]],
		['"${my input}"', ["two words"]],
		["--name=${my input}", ["--name=two words"]],
		["${job_output_dir}/result.json", ["/out/result.json"]],
		["${-f :input_file}", ["-f", "/in/input_file/a.png"]],
		["${--in:my input}", ["--in", "two words"]],
		["${-o :job_output_dir}", ["-o", "/out"]],
		["x${-f :input_file}", ["x/in/input_file/a.png"]],
		["${-f :input_file}${dir}", ["/in/input_file/a.png/in/dir"]],
		["a ${opt} b", ["a", "b"]],
		["a ${-o :opt} b", ["a", "b"]],
		["--opt=${opt}", ["--opt="]],
		["x${-o :opt}y", ["xy"]],
		["${opt}${missing}", []],
		['"" ${opt}', [""]],
		["${a:b:input_file}", ["a:b", "/in/input_file/a.png"]],
		["${ :input_file}", ["/in/input_file/a.png"]],
		['-c "exit 3"', ["-c", "exit 3"]]
	])("substitutes %j", (args, expected) => {
		expect(run(args)).toEqual(expected);
	});

	it("never re-splits or re-scans a value", () => {
		const result = substituteArguments(["${a}", "${-f :a}", "x${b}"], {
			inputs: { a: "one 'two' \"three\" $HOME", b: "${a} $& $1" },
			jobOutputDir: "/out"
		});
		expect(result).toEqual([
			"one 'two' \"three\" $HOME",
			"-f",
			"one 'two' \"three\" $HOME",
			"x${a} $& $1"
		]);
	});

	it("works on Scale's make_geotiff example", () => {
		const iface = parseJobInterface(MAKE_GEOTIFF);
		expect(
			substituteArguments(splitCommandArguments(iface.command_arguments), {
				inputs: {
					image: "/in/image/a.png",
					georeference_data: "/in/georeference_data/b.csv"
				},
				jobOutputDir: "/job/outputs"
			})
		).toEqual(["/in/image/a.png", "/in/georeference_data/b.csv", "/job/outputs"]);
	});
});
