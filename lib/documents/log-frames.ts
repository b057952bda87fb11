/**
 * The frames of a followed execution's logs, from the agent to the control plane: a byte naming
 * the stream (1 stdout, 2 stderr, 3 "what was written before you came ends here", empty), its
 * length (4 bytes, big-endian), the bytes. One stream of frames carries both outputs in the
 * order the agent read them.
 */

export type LogStream = "stdout" | "stderr";
export type FrameKind = LogStream | "live";

const CODE: Record<FrameKind, number> = { stdout: 1, stderr: 2, live: 3 };
const KIND: Record<number, FrameKind> = { 1: "stdout", 2: "stderr", 3: "live" };
const HEADER = 5;

export function encodeFrame(stream: FrameKind, data: Buffer = Buffer.alloc(0)): Buffer {
	const header = Buffer.alloc(HEADER);
	header[0] = CODE[stream];
	header.writeUInt32BE(data.length, 1);
	return Buffer.concat([header, data]);
}

/** Splits a byte stream into frames, whatever the chunks it arrives in. */
export class FrameReader {
	private pending: Buffer = Buffer.alloc(0);

	/** The whole frames `chunk` completes; a partial one waits for the next chunk. */
	push(chunk: Buffer): { stream: FrameKind; data: Buffer }[] {
		this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
		const out: { stream: FrameKind; data: Buffer }[] = [];
		let at = 0;
		while (this.pending.length - at >= HEADER) {
			const length = this.pending.readUInt32BE(at + 1);
			if (this.pending.length - at - HEADER < length) break;
			const kind = KIND[this.pending[at]];
			if (kind === undefined)
				throw new Error(`log frame of unknown kind ${this.pending[at]}`);
			out.push({
				stream: kind,
				data: this.pending.subarray(at + HEADER, at + HEADER + length)
			});
			at += HEADER + length;
		}
		this.pending = this.pending.subarray(at);
		return out;
	}
}
