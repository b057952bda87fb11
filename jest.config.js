"use strict";

/**
 * Unit tests need nothing; service and cluster tests share one embedded PostgreSQL (globalSetup),
 * and tests that run containers one dockerd of the run's own (as root; test/helpers/dockerd.ts).
 */
module.exports = {
	testEnvironment: "node",
	roots: ["<rootDir>/test"],
	testMatch: ["**/*.test.ts"],
	transform: { "^.+\\.ts$": ["@swc/jest", { jsc: { target: "es2022" } }] },
	globalSetup: "<rootDir>/test/setup/global-setup.ts",
	globalTeardown: "<rootDir>/test/setup/global-teardown.ts",
	testTimeout: 60000,
	maxWorkers: 2
};
