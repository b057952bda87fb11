/**
 * NATS refuses a message above its max_payload (1 MB by default). A call that carries several
 * executions or reports (`node-agent.run`, `scheduler.exeFinished`) is kept under CALL_CHARS
 * characters of JSON, at most three bytes each in UTF-8 (768 KiB); an item above that goes in a
 * call of its own, as every item did before calls carried several.
 */
export const CALL_CHARS = 256 * 1024;

/** Splits `items`, in order, into groups whose JSON adds up to at most `limit` characters. */
export function callGroups<T>(
	items: readonly T[],
	jsonOf: (item: T) => unknown = item => item,
	limit = CALL_CHARS
): T[][] {
	const groups: T[][] = [];
	let group: T[] = [];
	let size = 0;
	for (const item of items) {
		const chars = JSON.stringify(jsonOf(item)).length;
		if (group.length > 0 && size + chars > limit) {
			groups.push(group);
			group = [];
			size = 0;
		}
		group.push(item);
		size += chars;
	}
	if (group.length > 0) groups.push(group);
	return groups;
}
