import type { IncomingMessage } from "http";
import Busboy, { type BusboyFileStream, type BusboyInstance } from "@fastify/busboy";
import { BadRequestError } from "../errors";

/** The largest configuration file an upload may carry. */
export const MAX_UPLOAD_BYTES = 5 * 1024 * 1024;

/** The most an upload's request may send: the file, and room for the form's other parts. */
const MAX_UPLOAD_REQUEST_BYTES = MAX_UPLOAD_BYTES + 64 * 1024;

function tooLarge(): BadRequestError {
	return new BadRequestError(`import: the file is larger than ${MAX_UPLOAD_BYTES} bytes`);
}

export interface UploadedFile {
	fileName: string;
	content: Buffer;
}

function readAll(stream: NodeJS.ReadableStream, limit: number): Promise<Buffer> {
	return new Promise((resolve, reject) => {
		const chunks: Buffer[] = [];
		let size = 0;
		stream.on("data", (chunk: Buffer) => {
			size += chunk.length;
			if (size > limit) {
				reject(new BadRequestError(`import: the file is larger than ${limit} bytes`));
				// the rest is not read: the 400 closes the connection (services/api.service.ts)
				stream.removeAllListeners("data");
				stream.pause();
				return;
			}
			chunks.push(chunk);
		});
		stream.once("end", () => resolve(Buffer.concat(chunks)));
		stream.once("error", reject);
	});
}

function readMultipart(req: IncomingMessage): Promise<UploadedFile> {
	return new Promise((resolve, reject) => {
		let found: Promise<UploadedFile> | null = null;
		let busboy: BusboyInstance;
		try {
			busboy = new Busboy({
				headers: req.headers as any,
				limits: { files: 1, fileSize: MAX_UPLOAD_BYTES }
			});
		} catch (err) {
			return reject(new BadRequestError(`import: ${(err as Error).message}`));
		}
		busboy.on("file", (field: string, stream: BusboyFileStream, fileName: string) => {
			if (field !== "import" || found) {
				stream.resume();
				return;
			}
			// Busboy stops the file at fileSize and says so with "limit": what was read is only a
			// truncated part of the file, which must not be taken for the whole.
			stream.once("limit", () => reject(tooLarge()));
			found = readAll(stream, MAX_UPLOAD_BYTES).then(content => ({ fileName, content }));
		});
		// Busboy reads a form to its end whatever its parts' limits (it skips what they cut off):
		// a form sent without a length is cut off here once it outgrows any upload.
		let received = 0;
		req.on("data", (chunk: Buffer) => {
			received += chunk.length;
			if (received <= MAX_UPLOAD_REQUEST_BYTES) return;
			req.unpipe(busboy);
			req.pause();
			reject(tooLarge());
		});
		busboy.on("error", (err: Error) => reject(new BadRequestError(`import: ${err.message}`)));
		busboy.on("finish", () => {
			if (!found)
				reject(new BadRequestError('import: the form has no file field named "import"'));
			else found.then(resolve, reject);
		});
		req.pipe(busboy);
	});
}

/**
 * Reads an uploaded configuration file, as Scale accepts it: a multipart form whose file field
 * is `import`, or the file itself as the body with its name in the `X-File-Name` header.
 * Only `.json` files are accepted.
 */
export async function readUpload(req: IncomingMessage & { body?: unknown }): Promise<UploadedFile> {
	// refused before a byte is read (the 400 closes the connection: services/api.service.ts)
	if (Number(req.headers["content-length"] ?? 0) > MAX_UPLOAD_REQUEST_BYTES) throw tooLarge();
	const type = String(req.headers["content-type"] || "");
	let file: UploadedFile;
	if (type.startsWith("multipart/form-data")) {
		file = await readMultipart(req);
	} else {
		const fileName = req.headers["x-file-name"];
		if (typeof fileName !== "string" || !fileName)
			throw new BadRequestError(
				"X-File-Name: the header naming the uploaded file is missing"
			);
		// A JSON body was already parsed by the route's body parser; anything else is still unread.
		const content =
			req.body !== undefined && typeof req.body === "object"
				? Buffer.from(JSON.stringify(req.body))
				: await readAll(req, MAX_UPLOAD_BYTES);
		file = { fileName, content };
	}
	if (!/\.json$/i.test(file.fileName))
		throw new BadRequestError(
			`import: unsupported file type "${file.fileName}" (a .json file is expected)`
		);
	return file;
}

/** The uploaded file's JSON, or a 400 saying why it is not JSON. */
export function parseUploadedJson(file: UploadedFile): unknown {
	try {
		return JSON.parse(file.content.toString("utf8"));
	} catch (err) {
		throw new BadRequestError(
			`import: ${file.fileName} is not valid JSON: ${(err as Error).message}`
		);
	}
}

/**
 * Alias middleware for `POST configuration/upload`: reads the uploaded file and hands its JSON
 * to the import action as `import`, so an upload is an import by another door.
 */
export function uploadAsImport(
	req: IncomingMessage & { body?: unknown; $params: Record<string, unknown> },
	_res: unknown,
	next: (err?: unknown) => void
): void {
	readUpload(req)
		.then(file => {
			req.$params = { import: parseUploadedJson(file) };
			next();
		})
		.catch(next);
}
