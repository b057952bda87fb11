import { promises as fs } from "fs";
import path from "path";
import { ASIDE_FOLDERS, type AsideStatus, type OpenIngest, type Settled } from "./protocol";

/**
 * What became of open ingests whose files are not in the strike's directory any more (an
 * earlier monitor's, or one whose settle call failed): a file found stored is INGESTED, one
 * found aside has that outcome, one found nowhere is ERRORED, as Scale marks a file it has lost.
 * Those still in the directory (under their name, or with the transfer suffix) are left to the
 * scan.
 */
export async function settlementsOf(
	open: OpenIngest[],
	directory: string,
	suffix: string
): Promise<Settled[]> {
	const results: Settled[] = [];
	for (const ingest of open) {
		const inDirectory =
			(await exists(path.join(directory, ingest.fileName))) ||
			(await exists(path.join(directory, ingest.fileName + suffix)));
		if (inDirectory) continue;
		if (ingest.status === "INGESTING" && ingest.target) {
			const size = await fs.stat(ingest.target).then(
				stat => stat.size,
				() => null
			);
			if (size !== null) {
				results.push({ ingestId: ingest.ingestId, status: "INGESTED", size });
				continue;
			}
		}
		if (ingest.status === "TRANSFERRED") {
			const aside = await findAside(ingest, directory);
			if (aside) {
				results.push({ ingestId: ingest.ingestId, status: aside });
				continue;
			}
		}
		results.push({ ingestId: ingest.ingestId, status: "ERRORED", reason: "the file is lost" });
	}
	return results;
}

async function findAside(ingest: OpenIngest, directory: string): Promise<AsideStatus | null> {
	for (const [status, folder] of Object.entries(ASIDE_FOLDERS) as [AsideStatus, string][]) {
		const dir = path.join(directory, folder);
		if (
			(await exists(path.join(dir, ingest.fileName))) ||
			(await exists(path.join(dir, `${ingest.fileName}.${ingest.ingestId}`)))
		)
			return status;
	}
	return null;
}

export async function exists(file: string): Promise<boolean> {
	return fs.lstat(file).then(
		() => true,
		() => false
	);
}
