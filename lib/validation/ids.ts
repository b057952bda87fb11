/** PostgreSQL's `integer`, the type of every id, priority, timeout and count column. */
export const INT4_MIN = -2147483648;
export const INT4_MAX = 2147483647;

/** A row's id in a JSON Schema: a positive PostgreSQL integer. */
export const ID_SCHEMA = { type: "integer", minimum: 1, maximum: INT4_MAX } as const;
