import type { ListSpec } from "./params";

/** What a list endpoint reads: its table, joins and columns, with its filters and orders (ListSpec). */
export interface ListSource extends ListSpec {
	/** The list's table with its alias (`job j`), or a trusted sub-select; counts read only this. */
	from: string;
	/**
	 * Joins that bring in what a row shows of the records it references (LEFT JOINs on primary
	 * keys). A page's rows are chosen from `from` alone, then joined: a deep page skips its
	 * offset's rows without joining them, and a count never joins. Filters must test `from`'s
	 * own columns (a filter on a referenced record's column uses a `lookup`, see ListFilter).
	 */
	joins?: string;
	/** `from`'s primary key (`j.id`): how a chosen page is joined back. Required with `joins`. */
	key?: string;
	/** SELECT list */
	columns: string;
}
