import Module from "module";
import path from "path";
import type DockerClass from "dockerode";

/**
 * dockerode, with the two parts it loads for engines an agent never speaks to deferred to
 * their first use: docker-modem's `ssh://` transport (ssh2) and dockerode's BuildKit sessions
 * (@grpc/grpc-js, @grpc/proto-loader). Loaded eagerly they cost every idle agent ~20 MiB of
 * RSS (docs/decisions.md, "An idle agent's memory"); both are plain functions in their
 * modules, so a stand-in that loads the real module when called changes no behaviour.
 */
function deferred(file: string): void {
	if (require.cache[file]) return;
	const standIn = new Module(file);
	standIn.filename = file;
	standIn.loaded = true;
	standIn.exports = function (this: unknown, ...args: unknown[]) {
		delete require.cache[file];
		const real = require(file) as (...a: unknown[]) => unknown;
		return real.apply(this, args);
	};
	require.cache[file] = standIn;
}

const dockerodeDir = path.dirname(require.resolve("dockerode"));
const modemDir = path.dirname(require.resolve("docker-modem", { paths: [dockerodeDir] }));
deferred(path.join(modemDir, "ssh.js"));
deferred(path.join(dockerodeDir, "session.js"));

export const Dockerode: typeof DockerClass = require("dockerode");
