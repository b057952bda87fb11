import path from "path";
import { FieldError } from "../errors";

/**
 * NFS exports as Scale names them (`host:/path`: a strike's `mount`, an nfs workspace's
 * `nfs_path`). This service mounts nothing: the operator mounts every export under one root on
 * every node, as autofs's `-hosts` map does under `/net`, and `NFS_MOUNT_ROOT` says where.
 */

const NFS_EXPORT = /^([^/:]+):(\/.*)$/;

/** Whether `value` names an NFS export (`host:/path`). */
export function isNfsExport(value: string): boolean {
	return NFS_EXPORT.test(value);
}

/**
 * Where the nodes have the export `value` mounted: `<root>/<host>/<path>`, the path normalised so
 * that it stays under `<root>/<host>`. Throws FieldError on `at` for what is not an export or
 * names no host.
 */
export function nfsMountPoint(value: string, root: string, at: string): string {
	const nfs = NFS_EXPORT.exec(value);
	if (!nfs) throw new FieldError(at, `"${value}" is not an NFS export (host:/path)`);
	const [, host, exported] = nfs;
	if (host === "." || host === "..") throw new FieldError(at, `"${value}" does not name a host`);
	return path.posix.join(root, host, path.posix.normalize(exported)).replace(/(.)\/$/, "$1");
}
