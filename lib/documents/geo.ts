/**
 * GeoJSON to the WKT the file records keep (no PostGIS here), after Scale's
 * storage/geospatial_utils.py: a Feature gives its geometry and properties, a FeatureCollection
 * its first feature, anything else is taken as a geometry. The center point is the centroid
 * (GEOS's definition: of the highest-dimension parts, area-weighted for polygons, length-weighted
 * for lines, the mean for points), written as a 2D POINT. Hand-written: the npm packages checked
 * compute another center or write other WKT (docs/decisions.md, Libraries).
 */

type Position = number[];

interface Geometry {
	type: string;
	coordinates?: unknown;
	geometries?: Geometry[];
}

export interface ParsedGeoJson {
	/** WKT, e.g. `POLYGON ((0 0, 1 0, 1 1, 0 0))`, or null when there is no usable geometry */
	geometry: string | null;
	/** WKT POINT of the centroid, or null */
	centerPoint: string | null;
	/** the feature's properties, or null when the document is a bare geometry or has none */
	properties: Record<string, unknown> | null;
}

export class GeoJsonError extends Error {}

/** Parses GeoJSON; throws GeoJsonError on a shape it cannot read. */
export function parseGeoJson(doc: unknown): ParsedGeoJson {
	if (!isObject(doc)) throw new GeoJsonError("geo_json must be an object");
	let geometry: unknown = doc;
	let properties: unknown = null;
	if (doc.type === "Feature") {
		geometry = doc.geometry;
		properties = doc.properties ?? null;
	} else if (doc.type === "FeatureCollection") {
		const first = Array.isArray(doc.features) ? doc.features[0] : undefined;
		if (!isObject(first)) throw new GeoJsonError("geo_json FeatureCollection has no feature");
		geometry = first.geometry;
		properties = first.properties ?? null;
	}
	const props = isObject(properties) ? (properties as Record<string, unknown>) : null;
	if (geometry === null || geometry === undefined)
		return { geometry: null, centerPoint: null, properties: props };
	const geom = checkGeometry(geometry);
	const center = centroid(geom);
	return {
		geometry: toWkt(geom),
		centerPoint: center ? `POINT (${num(center[0])} ${num(center[1])})` : null,
		properties: props
	};
}

function isObject(value: unknown): value is Record<string, any> {
	return typeof value === "object" && value !== null && !Array.isArray(value);
}

const DEPTH: Record<string, number> = {
	Point: 0,
	MultiPoint: 1,
	LineString: 1,
	MultiLineString: 2,
	Polygon: 2,
	MultiPolygon: 3
};

function checkGeometry(value: unknown): Geometry {
	if (!isObject(value) || typeof value.type !== "string")
		throw new GeoJsonError("geometry must be an object with a type");
	if (value.type === "GeometryCollection") {
		if (!Array.isArray(value.geometries))
			throw new GeoJsonError("GeometryCollection needs geometries");
		return { type: value.type, geometries: value.geometries.map(checkGeometry) };
	}
	const depth = DEPTH[value.type];
	if (depth === undefined) throw new GeoJsonError(`unknown geometry type "${value.type}"`);
	checkCoordinates(value.coordinates, depth, value.type);
	return { type: value.type, coordinates: value.coordinates };
}

function checkCoordinates(value: unknown, depth: number, type: string): void {
	if (!Array.isArray(value)) throw new GeoJsonError(`${type} coordinates must be arrays`);
	if (depth === 0) {
		if (value.length < 2 || value.length > 4 || !value.every(Number.isFinite))
			throw new GeoJsonError(`${type} has a position that is not 2 to 4 numbers`);
		return;
	}
	for (const item of value) checkCoordinates(item, depth - 1, type);
}

// ---- WKT ----------------------------------------------------------------------------------

function num(n: number): string {
	return String(n === 0 ? 0 : n);
}

function pos(p: Position, z: boolean): string {
	return z ? `${num(p[0])} ${num(p[1])} ${num(p[2] ?? 0)}` : `${num(p[0])} ${num(p[1])}`;
}

function list(positions: Position[], z: boolean): string {
	return `(${positions.map(p => pos(p, z)).join(", ")})`;
}

function firstPosition(geom: Geometry): Position | null {
	if (geom.type === "GeometryCollection") {
		for (const g of geom.geometries ?? []) {
			const p = firstPosition(g);
			if (p) return p;
		}
		return null;
	}
	let c: any = geom.coordinates;
	while (Array.isArray(c) && Array.isArray(c[0])) c = c[0];
	return Array.isArray(c) && c.length > 0 ? (c as Position) : null;
}

/** WKT of a checked geometry; `Z` when its positions carry a third coordinate. */
export function toWkt(geom: Geometry): string {
	const first = firstPosition(geom);
	const z = !!first && first.length >= 3;
	const tag = (name: string) => (z ? `${name} Z` : name);
	const c = geom.coordinates as any;
	switch (geom.type) {
		case "Point":
			return c.length === 0 ? "POINT EMPTY" : `${tag("POINT")} (${pos(c, z)})`;
		case "MultiPoint":
			return c.length === 0
				? "MULTIPOINT EMPTY"
				: `${tag("MULTIPOINT")} (${c.map((p: Position) => `(${pos(p, z)})`).join(", ")})`;
		case "LineString":
			return c.length === 0 ? "LINESTRING EMPTY" : `${tag("LINESTRING")} ${list(c, z)}`;
		case "MultiLineString":
			return c.length === 0
				? "MULTILINESTRING EMPTY"
				: `${tag("MULTILINESTRING")} (${c.map((l: Position[]) => list(l, z)).join(", ")})`;
		case "Polygon":
			return c.length === 0
				? "POLYGON EMPTY"
				: `${tag("POLYGON")} (${c.map((r: Position[]) => list(r, z)).join(", ")})`;
		case "MultiPolygon":
			return c.length === 0
				? "MULTIPOLYGON EMPTY"
				: `${tag("MULTIPOLYGON")} (${c
						.map((p: Position[][]) => `(${p.map(r => list(r, z)).join(", ")})`)
						.join(", ")})`;
		default: {
			const parts = geom.geometries ?? [];
			return parts.length === 0
				? "GEOMETRYCOLLECTION EMPTY"
				: `GEOMETRYCOLLECTION (${parts.map(toWkt).join(", ")})`;
		}
	}
}

// ---- centroid -----------------------------------------------------------------------------

interface Parts {
	points: Position[];
	lines: Position[][];
	polygons: Position[][][];
}

function collect(geom: Geometry, into: Parts): Parts {
	const c = geom.coordinates as any;
	switch (geom.type) {
		case "Point":
			if (c.length > 0) into.points.push(c);
			break;
		case "MultiPoint":
			into.points.push(...c);
			break;
		case "LineString":
			if (c.length > 0) into.lines.push(c);
			break;
		case "MultiLineString":
			into.lines.push(...c.filter((l: Position[]) => l.length > 0));
			break;
		case "Polygon":
			if (c.length > 0) into.polygons.push(c);
			break;
		case "MultiPolygon":
			into.polygons.push(...c.filter((p: Position[][]) => p.length > 0));
			break;
		default:
			for (const g of geom.geometries ?? []) collect(g, into);
	}
	return into;
}

/** The centroid [x, y] of a checked geometry, or null when it is empty. */
export function centroid(geom: Geometry): [number, number] | null {
	const parts = collect(geom, { points: [], lines: [], polygons: [] });
	if (parts.polygons.length > 0) {
		const area = areaCentroid(parts.polygons);
		if (area) return area;
		return lineCentroid(parts.polygons.flat()) ?? pointCentroid(parts.polygons.flat(2));
	}
	if (parts.lines.length > 0)
		return lineCentroid(parts.lines) ?? pointCentroid(parts.lines.flat());
	return pointCentroid(parts.points);
}

function areaCentroid(polygons: Position[][][]): [number, number] | null {
	const origin = polygons[0][0][0];
	let area = 0;
	let cx = 0;
	let cy = 0;
	for (const polygon of polygons) {
		polygon.forEach((ring, i) => {
			const { a, x, y } = ringMoments(ring, origin);
			// The shell adds, holes take away, whichever way each ring winds.
			const sign = (i === 0 ? 1 : -1) * Math.sign(a);
			area += sign * a;
			cx += sign * x;
			cy += sign * y;
		});
	}
	if (Math.abs(area) < 1e-15) return null;
	return [origin[0] + cx / (3 * area), origin[1] + cy / (3 * area)];
}

/** Twice the signed area of a ring, and its first moments (times 6 ÷ 2), relative to `o`. */
function ringMoments(ring: Position[], o: Position): { a: number; x: number; y: number } {
	let a = 0;
	let x = 0;
	let y = 0;
	for (let i = 0; i + 1 < ring.length; i++) {
		const x0 = ring[i][0] - o[0];
		const y0 = ring[i][1] - o[1];
		const x1 = ring[i + 1][0] - o[0];
		const y1 = ring[i + 1][1] - o[1];
		const cross = x0 * y1 - x1 * y0;
		a += cross;
		x += (x0 + x1) * cross;
		y += (y0 + y1) * cross;
	}
	return { a: a / 2, x: x / 2, y: y / 2 };
}

function lineCentroid(lines: Position[][]): [number, number] | null {
	let length = 0;
	let cx = 0;
	let cy = 0;
	for (const line of lines) {
		for (let i = 0; i + 1 < line.length; i++) {
			const [x0, y0] = line[i];
			const [x1, y1] = line[i + 1];
			const l = Math.hypot(x1 - x0, y1 - y0);
			length += l;
			cx += (l * (x0 + x1)) / 2;
			cy += (l * (y0 + y1)) / 2;
		}
	}
	return length > 0 ? [cx / length, cy / length] : null;
}

function pointCentroid(points: Position[]): [number, number] | null {
	if (points.length === 0) return null;
	let x = 0;
	let y = 0;
	for (const p of points) {
		x += p[0];
		y += p[1];
	}
	return [x / points.length, y / points.length];
}
