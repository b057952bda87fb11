import type { Sequelize } from "sequelize";
import { type Sql, transaction } from "../db/run";
import { parseConfigurationImport } from "../documents/configuration";
import { referencedJobTypes } from "../documents/recipe-definition";
import type { Warning } from "../documents/types";
import { exportErrors, importError } from "../records/error";
import { exportJobTypes, findJobTypeId } from "../records/job-type";
import { saveJobType } from "../records/job-type-save";
import { exportRecipeTypes, findRecipeTypeId, saveRecipeType } from "../records/recipe-type";

export const INCLUDES = ["recipe_types", "job_types", "errors"] as const;
export type Include = (typeof INCLUDES)[number];

export interface ExportFilter {
	include?: Include[];
	recipeTypeIds?: number[];
	recipeTypeNames?: string[];
	jobTypeIds?: number[];
	jobTypeNames?: string[];
	jobTypeCategories?: string[];
	errorIds?: number[];
	errorNames?: string[];
}

const given = (list?: unknown[]) => (list && list.length ? list : undefined);

/**
 * The configuration export, filtered as Scale cascades its filters: recipe type filters narrow
 * the job types to those the recipes use (unless job types are filtered themselves); any recipe
 * or job type filter narrows the errors to those the job types' mappings name (unless errors
 * are filtered themselves). `include` picks which lists are filled, applied last so the
 * cascade still works.
 */
export async function exportConfiguration(db: Sequelize, f: ExportFilter) {
	const recipeFilter = !!(given(f.recipeTypeIds) || given(f.recipeTypeNames));
	const jobFilter = !!(
		given(f.jobTypeIds) ||
		given(f.jobTypeNames) ||
		given(f.jobTypeCategories)
	);
	const recipeTypes = (await exportRecipeTypes(db, {
		ids: given(f.recipeTypeIds) as number[] | undefined,
		names: given(f.recipeTypeNames) as string[] | undefined
	})) as { definition: unknown }[];
	const jobTypes = (await exportJobTypes(db, {
		ids: given(f.jobTypeIds) as number[] | undefined,
		names: given(f.jobTypeNames) as string[] | undefined,
		categories: given(f.jobTypeCategories) as string[] | undefined,
		// As in Scale's get_job_types, job type filters of their own take over from the cascade.
		keys:
			recipeFilter && !jobFilter
				? recipeTypes.flatMap(r => referencedJobTypes(r.definition))
				: undefined
	})) as { error_mapping?: { exit_codes?: Record<string, string> } | null }[];
	const errorFilter = !!(given(f.errorIds) || given(f.errorNames));
	const mappedNames = [
		...new Set(jobTypes.flatMap(j => Object.values(j.error_mapping?.exit_codes ?? {})))
	];
	const errors = await exportErrors(db, {
		ids: given(f.errorIds) as number[] | undefined,
		names:
			(given(f.errorNames) as string[] | undefined) ??
			((recipeFilter || jobFilter) && !errorFilter ? mappedNames : undefined)
	});
	const include = new Set<Include>(f.include && f.include.length ? f.include : INCLUDES);
	return {
		version: "1.0",
		recipe_types: include.has("recipe_types") ? recipeTypes : [],
		job_types: include.has("job_types") ? jobTypes : [],
		errors: include.has("errors") ? errors : []
	};
}

/** Thrown to roll a validation's transaction back once everything has been checked. */
class DryRun extends Error {
	constructor(public warnings: Warning[]) {
		super("dry run");
	}
}

async function applyImport(db: Sequelize, doc: unknown, t: Sql): Promise<Warning[]> {
	const { document, warnings } = parseConfigurationImport(doc, "import");
	// Errors first, then job types (whose mappings name errors), then recipe types (whose
	// definitions name job types): each sees what the import wrote before it, in `t`.
	for (const [i, e] of document.errors.entries())
		warnings.push(...(await importError(db, e, t, `import.errors[${i}]`)));
	for (const [i, jt] of document.job_types.entries()) {
		const existingId = await findJobTypeId(db, jt.name, jt.version, t);
		const saved = await saveJobType(db, jt as any, t, {
			existingId: existingId ?? undefined,
			field: `import.job_types[${i}]`
		});
		warnings.push(...saved.warnings);
	}
	for (const [i, rt] of document.recipe_types.entries()) {
		const existingId = await findRecipeTypeId(db, rt.name, rt.version, t);
		const saved = await saveRecipeType(db, rt as any, t, {
			existingId: existingId ?? undefined,
			field: `import.recipe_types[${i}]`
		});
		warnings.push(...saved.warnings);
	}
	// An edited job type's new interface is checked against the recipe types using it, which the
	// same import may then check again: each warning is reported once.
	const seen = new Set<string>();
	return warnings.filter(w => {
		const key = JSON.stringify([w.id, w.details]);
		return seen.has(key) ? false : (seen.add(key), true);
	});
}

/**
 * Imports a configuration: creates or updates errors, job types and recipe types by name (and
 * version), all or nothing in one transaction. With `dryRun` everything is checked and written
 * exactly as an import would, then rolled back, so validation cannot disagree with import.
 */
export async function importConfiguration(
	db: Sequelize,
	doc: unknown,
	opts: { dryRun: boolean }
): Promise<Warning[]> {
	try {
		return await transaction(db, async t => {
			const warnings = await applyImport(db, doc, t);
			if (opts.dryRun) throw new DryRun(warnings);
			return warnings;
		});
	} catch (err) {
		if (err instanceof DryRun) return err.warnings;
		throw err;
	}
}
