import fs from "fs";
import os from "os";
import path from "path";
import {
	authorizationBlock,
	identitiesDir,
	identity,
	loadIdentities,
	type NatsRole
} from "../lib/cluster/nats-identities";
import { clusterTlsFiles } from "../lib/cluster/tls";

/**
 * `npm run nats-identity -- <agent|control|operator> <node ID>`: a NATS identity for one more
 * process of the cluster whose data directory is DATA_DIR (default ./data/cluster, `npm run
 * cluster`'s), kept there like the others. Prints the file to copy to the machine that runs the
 * process, and the nats-server `authorization` block of every identity there (for a nats-server
 * of one's own; `npm run cluster` writes it at its next start). When the cluster has a CA
 * (`npm run cluster` makes one, <data>/nats/tls/ca.pem), the file names it in NATS_TLS_CA
 * (NATS_TLS_CA_PATH: where it lies on the other machine; default the same path) and TRANSPORTER
 * is a tls:// URL. See README, "Who may call what on NATS".
 */

const ROLES: NatsRole[] = ["agent", "control", "operator"];

function main(): number {
	const [role, name] = process.argv.slice(2);
	if (!ROLES.includes(role as NatsRole) || !name) {
		process.stderr.write(
			"usage: npm run nats-identity -- <agent|control|operator> <node ID>\n" +
				"  DATA_DIR: the cluster's data directory (./data/cluster)\n" +
				"  NATS_URL: the address the process reaches nats-server at (tls://<this host>:4222,\n" +
				"    nats://… when the cluster has no CA)\n" +
				"  NATS_TLS_CA_PATH: where the cluster's CA certificate lies on that machine\n" +
				"    (default: the same path as here)\n"
		);
		return 2;
	}
	const dataDir = path.resolve(process.env.DATA_DIR || "./data/cluster");
	const ca = clusterTlsFiles(path.join(identitiesDir(dataDir), "tls")).caFile;
	const tls = fs.existsSync(ca);
	const transporter = process.env.NATS_URL || `${tls ? "tls" : "nats"}://${os.hostname()}:4222`;
	const remoteCa = tls ? process.env.NATS_TLS_CA_PATH || ca : undefined;
	let made;
	try {
		made = identity(dataDir, name, role as NatsRole, transporter, remoteCa);
	} catch (err) {
		process.stderr.write(`${(err as Error).message}\n`);
		return 2;
	}
	const all = loadIdentities(dataDir);
	process.stdout.write(
		[
			`NATS identity of ${made.name} (${made.role}): ${made.file}`,
			"Copy that file to the machine that runs it (mode 0600, its owner's alone), then:",
			`  . ./${path.basename(made.file)} && ${made.role === "operator" ? "npm run repl" : made.role === "agent" ? "npm run agent" : "npm start"}`,
			...(remoteCa
				? [
						"",
						`nats-server requires TLS: copy also the cluster's CA certificate ${ca}`,
						`(public; not ca.key) to ${remoteCa} on that machine (its NATS_TLS_CA).`
					]
				: []),
			"",
			"nats-server knows it after a restart of `npm run cluster`, or, for a nats-server of",
			`your own, with this authorization block (all ${all.length} identities in ${path.dirname(made.file)})`,
			"in its configuration and `nats-server --signal reload`:",
			"",
			authorizationBlock(all),
			""
		].join("\n")
	);
	return 0;
}

process.exitCode = main();
