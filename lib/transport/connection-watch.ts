/** What nats.js reports of a connection (its `status()` iterator), as far as this module reads. */
export interface NatsStatusSource {
	status(): AsyncIterable<{ type: string }>;
}

/**
 * Calls `onDown` when the NATS connection under Moleculer's transporter is lost and `onUp` when
 * it is back. Moleculer's NATS transporter lets the nats client reconnect by itself and tells the
 * broker nothing (no `$transporter.connected` with `wasReconnect`), so a process cut off from
 * NATS cannot otherwise know it was. Answers false when the broker has no such connection (no
 * transporter, or another kind).
 */
export function watchNatsConnection(
	transit: unknown,
	onDown: () => void,
	onUp: () => void
): boolean {
	const client = (transit as { tx?: { client?: Partial<NatsStatusSource> } } | undefined)?.tx
		?.client;
	if (client === undefined || typeof client.status !== "function") return false;
	const statuses = client.status();
	void (async () => {
		for await (const s of statuses) {
			if (s.type === "disconnect") onDown();
			else if (s.type === "reconnect") onUp();
		}
	})().catch(() => undefined);
	return true;
}
