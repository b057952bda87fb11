import type { Sequelize } from "sequelize";
import { selectPrepared } from "../db/run";
import { NotFoundError } from "../errors";
import { formatDatetime } from "../validation/schema";
import type { RecordSpec } from "../list/record-spec";
import type { ListSource } from "../list/types";
import { FILE_VERSION } from "./file-records";
import {
	JOB_TYPE_BASE_FIELDS,
	jobTypeCategoryFilter,
	jobTypeNameFilter,
	jobTypeBaseOf,
	type JobTypeBaseColumns
} from "./job";
import {
	FILE_COLUMNS,
	FILE_ORDERABLE,
	notFoundDetail,
	serializeProductFile,
	serializeSourceFile,
	type FileRef,
	type ScaleFileRow
} from "./scale-file";

/**
 * Products as the REST interface shows them (Scale 3.0's product/models.py ProductFileManager
 * get_products, get_details and populate_source_ancestors, product/serializers.py): the list, its
 * updates view with each product's source files, and the details with the files it came from and
 * the products made from it. Registration at job completion is lib/records/product.ts.
 */

/** A product read with PRODUCT_COLUMNS: the file, its workspace and its job type. */
export type ProductRow = ScaleFileRow & JobTypeBaseColumns;

/**
 * The most files a details record lists as related (sources, ancestors, descendants, a source's
 * products), oldest first as in Scale: a file processed again and again would otherwise make its
 * details as large as the product table.
 */
export const RELATED_LIMIT = 1000;

/** Products only: an inlined sub-select, so the partial indexes on products apply (`xmin`: a record's version). */
const PRODUCTS = "(SELECT *, xmin FROM scale_file WHERE file_type = 'PRODUCT') f";

const PRODUCT_JOINS = `LEFT JOIN workspace w ON w.id = f.workspace_id
	LEFT JOIN job_type jt ON jt.id = f.job_type_id`;

const PRODUCT_COLUMNS = [
	FILE_COLUMNS,
	...JOB_TYPE_BASE_FIELDS.filter(f => f !== "id").map(f => `jt.${f} AS jt_${f}`)
].join(", ");

/**
 * GET /products/ and /products/updates/. Scale filters both on last_modified and orders them by
 * it unless told otherwise; it filters is_operational on the job type's flag, we on the product's
 * own (what the record shows, and what its index serves).
 */
export const PRODUCT_LIST: ListSource = {
	from: PRODUCTS,
	joins: PRODUCT_JOINS,
	key: "f.id",
	columns: PRODUCT_COLUMNS,
	orderable: {
		...FILE_ORDERABLE,
		...Object.fromEntries(
			[
				"is_operational",
				"is_published",
				"has_been_published",
				"published",
				"unpublished"
			].map(f => [f, `f.${f}`])
		),
		job_type: "f.job_type_id",
		job_type__id: "f.job_type_id",
		job_type__name: "jt.name",
		job_type__version: "jt.version",
		job_type__title: "jt.title",
		job_type__category: "jt.category",
		job: "f.job_id",
		job__id: "f.job_id",
		job_exe: "f.job_exe_id",
		job_exe__id: "f.job_exe_id"
	},
	defaultOrder: ["last_modified"],
	timeColumn: "f.last_modified",
	filters: {
		job_type_id: { column: "f.job_type_id", type: "integer" },
		job_type_name: jobTypeNameFilter("f.job_type_id"),
		job_type_category: jobTypeCategoryFilter("f.job_type_id"),
		is_operational: { column: "f.is_operational", type: "boolean" },
		file_name: { column: "f.file_name", type: "string" }
	}
};

/**
 * GET /products/updates/: the list's products, filters and order, as in Scale (get_products),
 * each read with the ids of its source files (the SOURCE ancestors its links name). A product's
 * links are written with it, in the transaction that creates it, and never changed after
 * (lib/records/product.ts, linkAncestry), so the ids are kept with its record as its refs.
 */
export const PRODUCT_UPDATES_LIST: ListSource = {
	...PRODUCT_LIST,
	columns: `${PRODUCT_COLUMNS},
		(SELECT array_agg(DISTINCT s.id ORDER BY s.id) FROM file_ancestry_link l
			JOIN scale_file s ON s.id = l.ancestor_id
			WHERE l.descendant_id = f.id AND s.file_type = 'SOURCE') AS source_ids`
};

function date(d: Date | null): string | null {
	return d ? formatDatetime(d) : null;
}

/** A product record (Scale's ProductFileSerializer): its job type in full. */
export function serializeProduct(row: ProductRow, apiRoot?: string) {
	// the job type's key stays where serializeProductFile put it, as with a spread
	return Object.assign(serializeProductFile(row, apiRoot), { job_type: jobTypeBaseOf(row) });
}

/** What last happened to a product, as its update record says (Scale's ProductFileUpdateField). */
export function productUpdate(
	row: Pick<ScaleFileRow, "is_deleted" | "deleted" | "is_published" | "published" | "unpublished">
) {
	if (row.is_deleted) return { action: "DELETED", when: date(row.deleted) };
	if (row.is_published) return { action: "PUBLISHED", when: date(row.published) };
	return { action: "UNPUBLISHED", when: date(row.unpublished) };
}

/** Product records, current while the file's row, the workspaces and the job types are unchanged. */
export const PRODUCT_RECORD: RecordSpec<ProductRow> = {
	name: "product",
	version: FILE_VERSION,
	versionJoins: "",
	generations: ["workspace", "job_type"],
	byApiRoot: true,
	record: (row, apiRoot) => serializeProduct(row, apiRoot)
};

/** Product update records with `update`; `source_files` are embedded apart (SOURCE_FILES). */
export const PRODUCT_UPDATE_RECORD: RecordSpec<ProductRow & { source_ids?: number[] | null }> = {
	...PRODUCT_RECORD,
	name: "product-update",
	refs: row => row.source_ids ?? [],
	record: (row, apiRoot) =>
		Object.assign(serializeProduct(row, apiRoot), { update: productUpdate(row) })
};

/**
 * The products made from a file (directly or further down), oldest first, RELATED_LIMIT at most:
 * a product's descendants, a source file's products.
 */
export async function loadDescendantProducts(db: Sequelize, fileId: number) {
	return selectPrepared<ProductRow>(
		db,
		`SELECT ${PRODUCT_COLUMNS} FROM scale_file f ${PRODUCT_JOINS}
		 WHERE f.id IN (SELECT descendant_id FROM file_ancestry_link WHERE ancestor_id = $1)
			AND f.file_type = 'PRODUCT'
		 ORDER BY f.created, f.id LIMIT ${RELATED_LIMIT}`,
		[fileId]
	);
}

/** The id of the product a details path names; by name, the one published last (as Scale). */
async function productId(db: Sequelize, ref: FileRef | null): Promise<number | null> {
	if (ref === null) return null;
	if ("id" in ref) return ref.id;
	const [row] = await selectPrepared<{ id: number }>(
		db,
		`SELECT id FROM scale_file WHERE file_name = $1 AND file_type = 'PRODUCT'
		 ORDER BY published DESC NULLS LAST, id DESC LIMIT 1`,
		[ref.fileName]
	);
	return row?.id ?? null;
}

/**
 * GET /products/{id}/ (or /products/{file_name}/): the product with `sources` and `ancestors`,
 * the source files and products it was made from, and `descendants`, the products made from it.
 */
export async function getProductDetails(db: Sequelize, ref: FileRef | null, apiRoot?: string) {
	const id = await productId(db, ref);
	const [product] =
		id === null
			? []
			: await selectPrepared<ProductRow>(
					db,
					`SELECT ${PRODUCT_COLUMNS} FROM scale_file f ${PRODUCT_JOINS}
					 WHERE f.id = $1 AND f.file_type = 'PRODUCT'`,
					[id]
				);
	if (!product) throw new NotFoundError(notFoundDetail("product", ref));
	const [ancestors, descendants] = await Promise.all([
		selectPrepared<ProductRow>(
			db,
			`SELECT ${PRODUCT_COLUMNS} FROM scale_file f ${PRODUCT_JOINS}
			 WHERE f.id IN (SELECT ancestor_id FROM file_ancestry_link WHERE descendant_id = $1)
			 ORDER BY f.created, f.id LIMIT ${RELATED_LIMIT}`,
			[product.id]
		),
		loadDescendantProducts(db, product.id)
	]);
	return Object.assign(serializeProduct(product, apiRoot), {
		sources: ancestors
			.filter(f => f.file_type === "SOURCE")
			.map(f => serializeSourceFile(f, apiRoot)),
		ancestors: ancestors
			.filter(f => f.file_type === "PRODUCT")
			.map(f => serializeProduct(f, apiRoot)),
		descendants: descendants.map(f => serializeProduct(f, apiRoot))
	});
}
