import { parentPort } from "worker_threads";
import { runFsRequest, type FsRequest } from "./fs-batch";

// A strike monitor's file-system thread (lib/ingest/fs-thread.ts): one request at a time, each
// answered under the id it came with.
parentPort!.on("message", ({ id, request }: { id: number; request: FsRequest }) => {
	let reply;
	try {
		reply = { id, reply: runFsRequest(request) };
	} catch (error) {
		reply = { id, error: (error as Error)?.message ?? String(error) };
	}
	parentPort!.postMessage(reply);
});
