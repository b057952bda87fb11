import path from "path";

/** The media type of a product when neither the interface nor the manifest gives one. */
export const DEFAULT_MEDIA_TYPE = "application/octet-stream";

/** A small built-in table of extensions (lower case, without the dot) → IANA media type. */
const BY_EXTENSION: Record<string, string> = {
	txt: "text/plain",
	log: "text/plain",
	csv: "text/csv",
	tsv: "text/tab-separated-values",
	htm: "text/html",
	html: "text/html",
	css: "text/css",
	md: "text/markdown",
	xml: "application/xml",
	json: "application/json",
	geojson: "application/geo+json",
	js: "text/javascript",
	pdf: "application/pdf",
	zip: "application/zip",
	gz: "application/gzip",
	tgz: "application/gzip",
	tar: "application/x-tar",
	bz2: "application/x-bzip2",
	"7z": "application/x-7z-compressed",
	h5: "application/x-hdf5",
	hdf5: "application/x-hdf5",
	hdf: "application/x-hdf",
	he5: "application/x-hdf5",
	nc: "application/x-netcdf",
	kml: "application/vnd.google-earth.kml+xml",
	kmz: "application/vnd.google-earth.kmz",
	shp: "application/x-shapefile",
	png: "image/png",
	jpg: "image/jpeg",
	jpeg: "image/jpeg",
	gif: "image/gif",
	bmp: "image/bmp",
	svg: "image/svg+xml",
	tif: "image/tiff",
	tiff: "image/tiff",
	ntf: "image/nitf",
	nitf: "image/nitf",
	jp2: "image/jp2",
	webp: "image/webp",
	mp4: "video/mp4",
	mpg: "video/mpeg",
	mpeg: "video/mpeg",
	mov: "video/quicktime",
	avi: "video/x-msvideo",
	mp3: "audio/mpeg",
	wav: "audio/wav",
	sh: "application/x-sh",
	py: "text/x-python",
	bin: "application/octet-stream",
	dat: "application/octet-stream"
};

/** The media type of `fileName` by its extension, else application/octet-stream. */
export function mediaTypeOf(fileName: string): string {
	const ext = path.extname(fileName).slice(1).toLowerCase();
	return BY_EXTENSION[ext] ?? DEFAULT_MEDIA_TYPE;
}
