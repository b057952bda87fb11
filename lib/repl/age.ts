/** "12 s ago", "3 m ago", "5 h ago", "2 d ago"; "-" for no time. */
export function age(at: string | Date | null | undefined, now = Date.now()): string {
	if (at === null || at === undefined || at === "") return "-";
	const ms = now - new Date(at).getTime();
	if (Number.isNaN(ms)) return "-";
	if (ms < 0) return "just now";
	return `${span(ms)} ago`;
}

/** A duration as "850 ms", "12 s", "3 m 20 s", "5 h 2 m", "2 d 4 h". */
export function span(ms: number): string {
	if (ms < 1000) return `${Math.round(ms)} ms`;
	const s = Math.floor(ms / 1000);
	if (s < 60) return `${s} s`;
	const m = Math.floor(s / 60);
	if (m < 60) return s % 60 ? `${m} m ${s % 60} s` : `${m} m`;
	const h = Math.floor(m / 60);
	if (h < 24) return m % 60 ? `${h} h ${m % 60} m` : `${h} h`;
	const d = Math.floor(h / 24);
	return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** A time as the tables print it: an age, or the timestamp itself when asked (--timestamps). */
export function when(at: string | Date | null | undefined, timestamps: boolean): string {
	if (!timestamps) return age(at);
	return at ? new Date(at).toISOString() : "-";
}
