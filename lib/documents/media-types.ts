import { lookup } from "mime-types";
import path from "path";

/** The media type of a product when neither the interface nor the manifest gives one. */
export const DEFAULT_MEDIA_TYPE = "application/octet-stream";

/**
 * Where Scale 3.0 named a type itself (scale/storage/media_type.py), its name stands: trigger
 * rules and recipe conditions written for Scale match on these. The rest are formats mime-types
 * (mime-db) has no extension for: application/vnd.shp is registered with IANA, but mime-db
 * lists it without its extension.
 */
const OVERRIDES: Record<string, string> = {
	geojson: "application/vnd.geo+json",
	h5: "image/x-hdf5-image",
	hdf5: "image/x-hdf5-image",
	he5: "image/x-hdf5-image",
	ntf: "image/x-nitf-image",
	nitf: "image/x-nitf-image",
	shp: "application/vnd.shp"
};

/** The media type of `fileName` by its extension, else application/octet-stream. */
export function mediaTypeOf(fileName: string): string {
	// The extension alone: mime-types would take a bare name such as "json" for one.
	const ext = path.extname(fileName).slice(1).toLowerCase();
	if (ext === "") return DEFAULT_MEDIA_TYPE;
	return OVERRIDES[ext] ?? (lookup(ext) || DEFAULT_MEDIA_TYPE);
}
