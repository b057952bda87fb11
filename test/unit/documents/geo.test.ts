import { centroid, GeoJsonError, parseGeoJson, toWkt } from "../../../lib/documents/geo";

const square = [
	[0, 0],
	[4, 0],
	[4, 4],
	[0, 4],
	[0, 0]
];

describe("parseGeoJson", () => {
	it("reads a bare polygon: WKT and its area centroid", () => {
		expect(parseGeoJson({ type: "Polygon", coordinates: [square] })).toEqual({
			geometry: "POLYGON ((0 0, 4 0, 4 4, 0 4, 0 0))",
			centerPoint: "POINT (2 2)",
			properties: null
		});
	});

	it("takes a Feature's geometry and properties", () => {
		const parsed = parseGeoJson({
			type: "Feature",
			properties: { name: "scene", cloud: 3 },
			geometry: { type: "Point", coordinates: [1.5, -2] }
		});
		expect(parsed).toEqual({
			geometry: "POINT (1.5 -2)",
			centerPoint: "POINT (1.5 -2)",
			properties: { name: "scene", cloud: 3 }
		});
	});

	it("takes the first feature of a FeatureCollection, as Scale does", () => {
		const parsed = parseGeoJson({
			type: "FeatureCollection",
			features: [
				{
					type: "Feature",
					properties: { n: 1 },
					geometry: { type: "Point", coordinates: [1, 1] }
				},
				{
					type: "Feature",
					properties: { n: 2 },
					geometry: { type: "Point", coordinates: [9, 9] }
				}
			]
		});
		expect(parsed.geometry).toBe("POINT (1 1)");
		expect(parsed.properties).toEqual({ n: 1 });
	});

	it("answers no geometry for a feature without one", () => {
		expect(parseGeoJson({ type: "Feature", properties: { a: 1 }, geometry: null })).toEqual({
			geometry: null,
			centerPoint: null,
			properties: { a: 1 }
		});
	});

	it("writes 3D geometries with Z and a 2D center point", () => {
		const parsed = parseGeoJson({
			type: "Polygon",
			coordinates: [
				[
					[0, 0, 5],
					[2, 0, 5],
					[2, 2, 5],
					[0, 2, 5],
					[0, 0, 5]
				]
			]
		});
		expect(parsed.geometry).toBe("POLYGON Z ((0 0 5, 2 0 5, 2 2 5, 0 2 5, 0 0 5))");
		expect(parsed.centerPoint).toBe("POINT (1 1)");
	});

	it("refuses what is not GeoJSON", () => {
		expect(() => parseGeoJson("x")).toThrow(GeoJsonError);
		expect(() => parseGeoJson({ type: "Circle", coordinates: [0, 0] })).toThrow(GeoJsonError);
		expect(() => parseGeoJson({ type: "Point", coordinates: ["a", 1] })).toThrow(GeoJsonError);
		expect(() => parseGeoJson({ type: "Polygon", coordinates: [[1, 2]] })).toThrow(
			GeoJsonError
		);
		expect(() => parseGeoJson({ type: "FeatureCollection", features: [] })).toThrow(
			GeoJsonError
		);
	});
});

describe("toWkt", () => {
	it("writes every geometry type", () => {
		expect(
			toWkt({
				type: "MultiPoint",
				coordinates: [
					[1, 2],
					[3, 4]
				]
			})
		).toBe("MULTIPOINT ((1 2), (3 4))");
		expect(
			toWkt({
				type: "LineString",
				coordinates: [
					[0, 0],
					[1, 1]
				]
			})
		).toBe("LINESTRING (0 0, 1 1)");
		expect(
			toWkt({
				type: "MultiLineString",
				coordinates: [
					[
						[0, 0],
						[1, 1]
					],
					[
						[2, 2],
						[3, 3]
					]
				]
			})
		).toBe("MULTILINESTRING ((0 0, 1 1), (2 2, 3 3))");
		expect(toWkt({ type: "MultiPolygon", coordinates: [[square]] })).toBe(
			"MULTIPOLYGON (((0 0, 4 0, 4 4, 0 4, 0 0)))"
		);
		expect(
			toWkt({
				type: "GeometryCollection",
				geometries: [
					{ type: "Point", coordinates: [1, 2] },
					{
						type: "LineString",
						coordinates: [
							[0, 0],
							[1, 0]
						]
					}
				]
			})
		).toBe("GEOMETRYCOLLECTION (POINT (1 2), LINESTRING (0 0, 1 0))");
		expect(toWkt({ type: "Point", coordinates: [] })).toBe("POINT EMPTY");
		expect(toWkt({ type: "GeometryCollection", geometries: [] })).toBe(
			"GEOMETRYCOLLECTION EMPTY"
		);
	});
});

describe("centroid", () => {
	it("weights polygons by area and takes holes away, whichever way rings wind", () => {
		// A 4x4 square with its right half's middle cut out; clockwise shell.
		const shell = [...square].reverse();
		const hole = [
			[2, 1],
			[4, 1],
			[4, 3],
			[2, 3],
			[2, 1]
		];
		const [x, y] = centroid({ type: "Polygon", coordinates: [shell, hole] })!;
		// area 16 - 4 = 12; x = (16*2 - 4*3) / 12
		expect(x).toBeCloseTo(20 / 12, 10);
		expect(y).toBeCloseTo(2, 10);
	});

	it("weights lines by length and averages points; polygons win over lines and points", () => {
		expect(
			centroid({
				type: "MultiLineString",
				coordinates: [
					[
						[0, 0],
						[2, 0]
					],
					[
						[0, 2],
						[0, 3]
					]
				]
			})
		).toEqual([2 / 3, 2.5 / 3]);
		expect(
			centroid({
				type: "MultiPoint",
				coordinates: [
					[0, 0],
					[2, 4]
				]
			})
		).toEqual([1, 2]);
		expect(
			centroid({
				type: "GeometryCollection",
				geometries: [
					{ type: "Point", coordinates: [100, 100] },
					{ type: "Polygon", coordinates: [square] }
				]
			})
		).toEqual([2, 2]);
		expect(centroid({ type: "MultiPoint", coordinates: [] })).toBeNull();
	});

	it("falls back to the outline for a polygon of no area", () => {
		const flat = [
			[0, 0],
			[2, 0],
			[0, 0]
		];
		expect(centroid({ type: "Polygon", coordinates: [flat] })).toEqual([1, 0]);
	});
});
