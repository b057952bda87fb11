import { lookup } from "mime-types";
import path from "path";

/** The media type of a product when neither the interface nor the manifest gives one. */
export const DEFAULT_MEDIA_TYPE = "application/octet-stream";

/**
 * Geospatial formats mime-types (mime-db) has no extension for. HDF5 has no registered type;
 * application/x-hdf5 is what HDF tools use. application/vnd.shp is registered with IANA, but
 * mime-db lists it without its extension.
 */
const GEOSPATIAL: Record<string, string> = {
	h5: "application/x-hdf5",
	hdf5: "application/x-hdf5",
	he5: "application/x-hdf5",
	shp: "application/vnd.shp"
};

/** The media type of `fileName` by its extension, else application/octet-stream. */
export function mediaTypeOf(fileName: string): string {
	// The extension alone: mime-types would take a bare name such as "json" for one.
	const ext = path.extname(fileName).slice(1).toLowerCase();
	if (ext === "") return DEFAULT_MEDIA_TYPE;
	return GEOSPATIAL[ext] ?? (lookup(ext) || DEFAULT_MEDIA_TYPE);
}
