import { imagesHash, normalizeImage, normalizeImages } from "../../../lib/documents/images";
import { ImageSets } from "../../../lib/scheduling/matching";

/** How placing compares an image with a node's (lib/scheduling/matching.ts): normalised forms. */
const imageAvailable = (ref: string, images: readonly string[]) =>
	normalizeImage(ref) !== "" && new Set(images).has(normalizeImage(ref));

describe("normalizeImage", () => {
	it.each([
		["busybox", "docker.io/library/busybox:latest"],
		["busybox:1.36", "docker.io/library/busybox:1.36"],
		["user/x", "docker.io/user/x:latest"],
		["user/x:2", "docker.io/user/x:2"],
		["library/busybox", "docker.io/library/busybox:latest"],
		["docker.io/busybox", "docker.io/library/busybox:latest"],
		["index.docker.io/user/x:1", "docker.io/user/x:1"],
		["registry.example:5000/x", "registry.example:5000/x:latest"],
		["registry.example:5000/x/y:1.2", "registry.example:5000/x/y:1.2"],
		["registry:5000/x/y:1.2", "registry:5000/x/y:1.2"],
		["quay.io/org/tool:v3", "quay.io/org/tool:v3"],
		["localhost/x", "localhost/x:latest"],
		["localhost:5000/x", "localhost:5000/x:latest"],
		["Registry/x", "Registry/x:latest"],
		["team/sub/x", "docker.io/team/sub/x:latest"],
		["x@sha256:abc", "docker.io/library/x@sha256:abc"],
		["x/y@sha256:abc", "docker.io/x/y@sha256:abc"],
		["x:1.0@sha256:abc", "docker.io/library/x@sha256:abc"],
		["registry:5000/x@sha256:abc", "registry:5000/x@sha256:abc"],
		["  busybox  ", "docker.io/library/busybox:latest"],
		["", ""]
	])("%s → %s", (ref, full) => {
		expect(normalizeImage(ref)).toBe(full);
	});

	it("is idempotent", () => {
		for (const ref of ["busybox", "user/x:1", "registry:5000/x", "x@sha256:abc", "localhost/x"])
			expect(normalizeImage(normalizeImage(ref))).toBe(normalizeImage(ref));
	});
});

describe("normalizeImages", () => {
	it("normalises, sorts, drops repeats and the engine's <none> placeholders", () => {
		expect(
			normalizeImages([
				"busybox:latest",
				"<none>:<none>",
				"<none>@<none>",
				"docker.io/library/busybox",
				"alpine@sha256:abc",
				"registry:5000/x/y:1.2"
			])
		).toEqual([
			"docker.io/library/alpine@sha256:abc",
			"docker.io/library/busybox:latest",
			"registry:5000/x/y:1.2"
		]);
	});
});

describe("imagesHash", () => {
	it("is empty for no images and the same for the same list", () => {
		expect(imagesHash([])).toBe("");
		const a = normalizeImages(["busybox", "alpine:3"]);
		const b = normalizeImages(["alpine:3", "busybox:latest"]);
		expect(imagesHash(a)).toBe(imagesHash(b));
		expect(imagesHash(a)).not.toBe(imagesHash(normalizeImages(["busybox"])));
		expect(imagesHash(a)).toMatch(/^[A-Za-z0-9_-]{27}$/);
	});
});

describe("normalised images", () => {
	const images = normalizeImages(["busybox:latest", "registry:5000/x/y:1.2", "x/y@sha256:abc"]);
	it("finds an image in any form among a node's normalised images", () => {
		expect(imageAvailable("busybox", images)).toBe(true);
		expect(imageAvailable("docker.io/library/busybox:latest", images)).toBe(true);
		expect(imageAvailable("registry:5000/x/y:1.2", images)).toBe(true);
		expect(imageAvailable("x/y@sha256:abc", images)).toBe(true);
		expect(imageAvailable("x/y:7@sha256:abc", images)).toBe(true);
	});
	it("does not confuse tags, registries or digests", () => {
		expect(imageAvailable("busybox:1.36", images)).toBe(false);
		expect(imageAvailable("registry:5000/x/y", images)).toBe(false);
		expect(imageAvailable("other:5000/x/y:1.2", images)).toBe(false);
		expect(imageAvailable("x/y:1.2", images)).toBe(false);
		expect(imageAvailable("x/y@sha256:def", images)).toBe(false);
		expect(imageAvailable("", images)).toBe(false);
	});
});

describe("ImageSets", () => {
	it("keeps lists by hash, knows the empty one, and forgets those no node has", () => {
		const sets = new ImageSets();
		expect(sets.known()).toEqual([""]);
		expect(sets.resolve("", null).size).toBe(0);
		const read = sets.resolve("h1", ["docker.io/library/busybox:latest"]);
		expect(read.has("docker.io/library/busybox:latest")).toBe(true);
		expect(sets.known().sort()).toEqual(["", "h1"]);
		// not read again: the kept list
		expect(sets.resolve("h1", null)).toBe(read);
		// unknown and not read: none
		expect(sets.resolve("h2", null).size).toBe(0);
		sets.resolve("h3", ["a"]);
		sets.retain(["h3"]);
		expect(sets.known().sort()).toEqual(["", "h3"]);
	});
});
