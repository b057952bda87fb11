import { createHash } from "crypto";

/**
 * Docker image references, as the scheduler compares them: a job type's `docker_image` against
 * the images a node's engine lists (its RepoTags, "busybox:latest", and RepoDigests,
 * "busybox@sha256:..."). Both sides are brought to one full form first, Docker's own
 * normalisation (distribution/reference's ParseNormalizedNamed):
 *
 *   busybox                  → docker.io/library/busybox:latest
 *   user/x                   → docker.io/user/x:latest
 *   busybox:1.36             → docker.io/library/busybox:1.36
 *   registry.example:5000/x  → registry.example:5000/x:latest
 *   x@sha256:abc             → docker.io/library/x@sha256:abc
 *
 * The first component of a name is a registry when it has a "." or a ":", is "localhost", or has
 * capitals (as Docker decides); "index.docker.io" is "docker.io". A reference with a digest is
 * kept as name@digest (a tag beside the digest is dropped: the digest says which image, and the
 * engine lists digests as name@digest). Nothing here talks to an engine or a registry.
 */

const DEFAULT_REGISTRY = "docker.io";
const LEGACY_DEFAULT_REGISTRY = "index.docker.io";
const OFFICIAL_PREFIX = "library/";

/** The full form of an image reference (see above); "" for a blank one. */
export function normalizeImage(ref: string): string {
	let name = ref.trim();
	if (name === "") return "";
	let digest = "";
	const at = name.indexOf("@");
	if (at >= 0) {
		digest = name.slice(at);
		name = name.slice(0, at);
	}
	let tag = "";
	const colon = name.lastIndexOf(":");
	if (colon > name.lastIndexOf("/")) {
		tag = name.slice(colon);
		name = name.slice(0, colon);
	}
	let registry = DEFAULT_REGISTRY;
	let path = name;
	const slash = name.indexOf("/");
	if (slash >= 0) {
		const head = name.slice(0, slash);
		if (
			head.includes(".") ||
			head.includes(":") ||
			head === "localhost" ||
			head.toLowerCase() !== head
		) {
			registry = head === LEGACY_DEFAULT_REGISTRY ? DEFAULT_REGISTRY : head;
			path = name.slice(slash + 1);
		}
	}
	if (registry === DEFAULT_REGISTRY && !path.includes("/")) path = OFFICIAL_PREFIX + path;
	if (digest !== "") return `${registry}/${path}${digest}`;
	return `${registry}/${path}${tag === "" ? ":latest" : tag}`;
}

/**
 * A node's image list as stored: each reference normalised, the engine's placeholders for
 * untagged images ("<none>:<none>", "<none>@<none>") and blanks left out, sorted, without repeats
 * (so the same images listed in another order are the same list).
 */
export function normalizeImages(refs: readonly string[]): string[] {
	const out = new Set<string>();
	for (const ref of refs) {
		if (ref.includes("<none>")) continue;
		const image = normalizeImage(ref);
		if (image !== "") out.add(image);
	}
	return [...out].sort();
}

/**
 * A short digest of a stored (normalised, sorted) image list: what a heartbeat compares to know
 * whether the list changed, and what the scheduler keeps the lists it has read by. "" for none.
 */
export function imagesHash(images: readonly string[]): string {
	if (images.length === 0) return "";
	return createHash("sha256").update(images.join("\n")).digest("base64url").slice(0, 27);
}
