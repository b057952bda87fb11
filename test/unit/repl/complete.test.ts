import { clusterValues, completer, type AskedKind } from "../../../lib/repl/complete";
import { COMMANDS } from "../../../lib/repl/commands";

/** The cluster as the completer asks it: these values, and a record of what was asked. */
function cluster(values: Partial<Record<AskedKind, string[]>>) {
	const asked: AskedKind[] = [];
	const source = async (kind: AskedKind) => {
		asked.push(kind);
		const found = values[kind];
		if (!found) throw new Error("no answer");
		return found;
	};
	return { asked, source };
}

describe("the REPL's completer", () => {
	const { asked, source } = cluster({
		"job-type": ["scale-clock", "scale-strike", "wordcount"],
		node: ["1", "2", "12"],
		"queued-job": ["40", "41"]
	});
	const complete = completer(COMMANDS, source);

	beforeEach(() => (asked.length = 0));

	it("leaves a command's name, and other commands, to moleculer-repl", async () => {
		expect(await complete("")).toBeNull();
		expect(await complete("lo")).toBeNull();
		expect(await complete("call job-types.li")).toBeNull();
		expect(asked).toEqual([]);
	});

	it("completes a command's options, short and long, not those given already", async () => {
		expect(await complete("logs 12 -")).toEqual([
			["--stream", "--tail", "-f", "--follow"],
			"-"
		]);
		expect(await complete("logs 12 --t")).toEqual([["--tail"], "--t"]);
		expect(await complete("logs 12 -f --")).toEqual([["--stream", "--tail"], "--"]);
		expect(await complete("logs 12 --follow --tail 5 ")).toEqual([["--stream"], ""]);
		expect(await complete("jobs --ti")).toEqual([["--timestamps"], "--ti"]);
		expect(await complete("node-status ")).toEqual([["--timestamps"], ""]);
		// a command without options: nothing
		expect(await complete("queue ")).toEqual([[], ""]);
	});

	it("completes an option's values: fixed ones, and job type names asked of the cluster", async () => {
		expect(await complete("logs 12 --stream s")).toEqual([["stdout", "stderr"], "s"]);
		expect(await complete("jobs -s R")).toEqual([["RUNNING"], "R"]);
		expect(await complete("jobs --status QUEUED --type scale-")).toEqual([
			["scale-clock", "scale-strike"],
			"scale-"
		]);
		expect(asked).toEqual(["job-type"]);
		// an option whose value is free text: nothing to offer
		expect(await complete("jobs --limit ")).toEqual([[], ""]);
	});

	it("completes ids: active nodes, QUEUED jobs for why", async () => {
		expect(await complete("node-pause 1")).toEqual([["1", "12"], "1"]);
		expect(await complete("node-drain ")).toEqual([["1", "2", "12"], ""]);
		expect(await complete("why 4")).toEqual([["40", "41"], "4"]);
		// once the id is given, the options (none for these)
		expect(await complete("node-pause 12 ")).toEqual([[], ""]);
		expect(asked).toEqual(["node", "node", "queued-job"]);
	});

	it("offers nothing it cannot ask for", async () => {
		const down = completer(COMMANDS, cluster({}).source);
		expect(await down("jobs --type w")).toEqual([[], "w"]);
		expect(await down("node-resume ")).toEqual([[], ""]);
	});
});

describe("the values asked of the cluster", () => {
	it("are asked once within a few seconds, and again after", async () => {
		const calls: string[] = [];
		const broker = {
			call: async (action: string) => {
				calls.push(action);
				return { results: [{ name: "b" }, { name: "a" }, { name: "a" }] };
			}
		};
		let now = 0;
		const values = clusterValues(broker as any, () => now);
		expect(await values("job-type")).toEqual(["a", "b"]);
		now = 4000;
		expect(await values("job-type")).toEqual(["a", "b"]);
		expect(calls).toEqual(["job-types.list"]);
		now = 6000;
		await values("job-type");
		expect(calls).toEqual(["job-types.list", "job-types.list"]);
	});

	it("are asked again after a failure", async () => {
		let fail = true;
		const broker = {
			call: async () => {
				if (fail) throw new Error("no answer");
				return { results: [{ id: 9, status: "QUEUED" }] };
			}
		};
		const values = clusterValues(broker as any, () => 0);
		await expect(values("queued-job")).rejects.toThrow("no answer");
		fail = false;
		expect(await values("queued-job")).toEqual(["9"]);
	});
});
