import { execFile } from "child_process";
import { randomBytes } from "crypto";
import fs from "fs";
import os from "os";
import path from "path";
import { promisify } from "util";

const run = promisify(execFile);

/** Where the cluster's CA and nats-server's certificate live, and what they are. */
export interface ClusterTls {
	/** the CA's certificate (PEM): what a client needs (NATS_TLS_CA) to trust nats-server */
	caFile: string;
	/** the CA's key (0600): signs the server's certificate, never leaves this directory */
	caKeyFile: string;
	/** nats-server's certificate, for 127.0.0.1, localhost and this host's name */
	certFile: string;
	/** nats-server's key (0600) */
	keyFile: string;
}

/** The files of the TLS of a cluster whose NATS data is in `dir` (`<data>/nats/tls`). */
export function clusterTlsFiles(dir: string): ClusterTls {
	const f = (name: string) => path.join(dir, name);
	return {
		caFile: f("ca.pem"),
		caKeyFile: f("ca.key"),
		certFile: f("server.pem"),
		keyFile: f("server.key")
	};
}

/** An openssl command, its arguments an array (no shell); its stderr in the error. */
async function openssl(bin: string, args: string[]): Promise<void> {
	try {
		await run(bin, args, { timeout: 60000 });
	} catch (err) {
		const e = err as Error & { stderr?: string };
		throw new Error(`openssl ${args[0]} failed: ${(e.stderr || e.message).trim()}`);
	}
}

/**
 * The cluster's CA and nats-server's certificate in `dir`, made with openssl at the first start
 * and kept afterwards (the clients trust the CA, so it must not change under them): a CA of its
 * own (10 years), and a server certificate signed by it for 127.0.0.1, localhost and this host's
 * name (825 days). The directory is 0700, the keys 0600. `hosts`: more names or IP addresses
 * for the server's certificate (taken into account only when it is made).
 */
export async function ensureClusterTls(
	dir: string,
	hosts: string[] = [],
	bin = "/usr/bin/openssl"
): Promise<ClusterTls> {
	const files = clusterTlsFiles(dir);
	fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
	fs.chmodSync(dir, 0o700);
	if (!fs.existsSync(bin)) bin = "openssl";
	if (!fs.existsSync(files.caFile) || !fs.existsSync(files.caKeyFile)) {
		for (const f of Object.values(files)) fs.rmSync(f, { force: true });
		await openssl(bin, [
			"req",
			"-x509",
			"-newkey",
			"rsa:2048",
			"-nodes",
			"-sha256",
			"-days",
			"3650",
			"-subj",
			`/CN=scale cluster CA ${randomBytes(4).toString("hex")}`,
			"-keyout",
			files.caKeyFile,
			"-out",
			files.caFile
		]);
	}
	if (!fs.existsSync(files.certFile) || !fs.existsSync(files.keyFile)) {
		const csr = path.join(dir, "server.csr");
		const ext = path.join(dir, "server.ext");
		const names = [...new Set(["localhost", os.hostname(), ...hosts].filter(Boolean))];
		const ips = [...new Set(["127.0.0.1", ...hosts.filter(h => /^[\d.]+$|:/.test(h))])];
		const san = [
			...ips.map(ip => `IP:${ip}`),
			...names.filter(n => !ips.includes(n)).map(n => `DNS:${n}`)
		].join(",");
		await openssl(bin, [
			"req",
			"-newkey",
			"rsa:2048",
			"-nodes",
			"-sha256",
			"-subj",
			"/CN=127.0.0.1",
			"-keyout",
			files.keyFile,
			"-out",
			csr
		]);
		fs.writeFileSync(
			ext,
			`subjectAltName=${san}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`
		);
		await openssl(bin, [
			"x509",
			"-req",
			"-sha256",
			"-in",
			csr,
			"-CA",
			files.caFile,
			"-CAkey",
			files.caKeyFile,
			"-set_serial",
			`0x${randomBytes(16).toString("hex")}`,
			"-days",
			"825",
			"-extfile",
			ext,
			"-out",
			files.certFile
		]);
		fs.rmSync(csr, { force: true });
		fs.rmSync(ext, { force: true });
	}
	for (const key of [files.caKeyFile, files.keyFile]) fs.chmodSync(key, 0o600);
	for (const cert of [files.caFile, files.certFile]) fs.chmodSync(cert, 0o644);
	return files;
}
