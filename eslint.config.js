"use strict";
const js = require("@eslint/js");
const tseslint = require("typescript-eslint");

module.exports = tseslint.config(
	{ ignores: ["dist/**", "node_modules/**", "data/**", "coverage/**"] },
	js.configs.recommended,
	...tseslint.configs.recommended,
	{
		files: ["**/*.ts"],
		rules: {
			"@typescript-eslint/no-explicit-any": "off",
			"@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
			"@typescript-eslint/no-require-imports": "off",
			"no-console": "off"
		}
	},
	{
		files: ["*.js", "scripts/*.js"],
		languageOptions: {
			globals: {
				require: "readonly",
				module: "writable",
				__dirname: "readonly",
				__filename: "readonly",
				process: "readonly",
				console: "readonly"
			}
		},
		rules: { "@typescript-eslint/no-require-imports": "off" }
	},
	{
		// node 20's globals, and the page's, in the functions it runs in the browser
		files: ["scripts/scale-ui-*.js"],
		languageOptions: {
			globals: {
				fetch: "readonly",
				URL: "readonly",
				URLSearchParams: "readonly",
				setTimeout: "readonly",
				document: "readonly"
			}
		}
	}
);
