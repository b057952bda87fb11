import path from "path";
import { FieldError } from "../errors";
import { assertSchema, compileChecker } from "../validation/schema";

/**
 * Scale 4.0's `s3` workspace broker: `{"type": "s3", "bucket_name": "...", "credentials":
 * {"access_key_id": "...", "secret_access_key": "..."}, "region_name": "...", "host_path":
 * "/mnt/bucket"}`, and `endpoint_url` for an S3-compatible store other than AWS. Without
 * credentials the standard AWS environment and profile chain is used, and without an endpoint
 * `AWS_ENDPOINT_URL_S3` (or AWS itself).
 */
export interface S3BrokerConfig {
	type: "s3";
	bucket_name: string;
	credentials?: { access_key_id: string; secret_access_key: string };
	region_name?: string;
	/** where the bucket is mounted read-only on every node (optional) */
	host_path?: string;
	endpoint_url?: string;
	[key: string]: unknown;
}

/** What the secret becomes in every answer of the API. */
export const MASKED_SECRET = "********";

/** S3's own rules for bucket names (3 to 63 characters, lower case, digits, dots, hyphens). */
const BUCKET_NAME = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$";

export const S3_BROKER_SCHEMA = {
	type: "object",
	required: ["type", "bucket_name"],
	properties: {
		type: { type: "string", const: "s3" },
		bucket_name: { type: "string", pattern: BUCKET_NAME },
		credentials: {
			type: "object",
			required: ["access_key_id", "secret_access_key"],
			additionalProperties: false,
			properties: {
				access_key_id: { type: "string", minLength: 1, maxLength: 256 },
				secret_access_key: { type: "string", minLength: 1, maxLength: 256 }
			}
		},
		region_name: { type: "string", pattern: "^[a-z0-9-]{1,50}$" },
		host_path: { type: "string", minLength: 1, maxLength: 4096 },
		endpoint_url: { type: "string", minLength: 1, maxLength: 1000 }
	}
};

const checkSchema = compileChecker(S3_BROKER_SCHEMA);

/**
 * Checks an s3 broker's fields (`at` names it, e.g. `json_config.broker`); nothing is asked of
 * the store, whose reachability from here says nothing of the nodes'. Throws FieldError.
 */
export function validateS3Broker(broker: unknown, at: string): S3BrokerConfig {
	assertSchema(checkSchema, broker, at);
	const s3 = broker as S3BrokerConfig;
	if (s3.endpoint_url !== undefined) {
		let url: URL | null;
		try {
			url = new URL(s3.endpoint_url);
		} catch {
			url = null;
		}
		if (!url || (url.protocol !== "http:" && url.protocol !== "https:"))
			throw new FieldError(
				`${at}.endpoint_url`,
				`must be an absolute http or https URL, got "${s3.endpoint_url}"`
			);
		if (url.username || url.password)
			throw new FieldError(
				`${at}.endpoint_url`,
				"must not hold credentials (give them in credentials)"
			);
	}
	if (
		s3.host_path !== undefined &&
		(!path.isAbsolute(s3.host_path) || s3.host_path.includes("\0"))
	)
		throw new FieldError(`${at}.host_path`, `must be an absolute path, got "${s3.host_path}"`);
	return s3;
}

/** A workspace configuration as the API answers it: the secret access key masked. */
export function maskBrokerSecrets<T extends { broker?: Record<string, unknown> } | undefined>(
	config: T
): T {
	const credentials = config?.broker?.credentials as Record<string, unknown> | undefined;
	if (!config || !credentials || typeof credentials !== "object") return config;
	return {
		...config,
		broker: {
			...config.broker,
			credentials: { ...credentials, secret_access_key: MASKED_SECRET }
		}
	};
}

/**
 * A new s3 broker given back the secret the API showed masked (a client that edits what it read)
 * keeps the stored one, when the access key is the same.
 */
export function keepMaskedSecret(
	given: Record<string, unknown>,
	stored: Record<string, unknown> | undefined
): Record<string, unknown> {
	const credentials = given.credentials as Record<string, string> | undefined;
	const old = stored?.credentials as Record<string, string> | undefined;
	if (
		credentials?.secret_access_key !== MASKED_SECRET ||
		!old ||
		old.access_key_id !== credentials.access_key_id
	)
		return given;
	return { ...given, credentials: { ...credentials, secret_access_key: old.secret_access_key } };
}

/** Where a workspace's objects are and who reaches them; no credentials: the AWS chain's. */
export interface S3Place {
	bucket: string;
	region?: string;
	/** an S3-compatible endpoint; absent: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or AWS */
	endpoint?: string;
	credentials?: { accessKeyId: string; secretAccessKey: string };
}

/** The S3 place of an s3 broker configuration; its credentials only when `withCredentials`. */
export function s3PlaceOf(broker: Record<string, any>, withCredentials: boolean): S3Place {
	const place: S3Place = { bucket: broker.bucket_name };
	if (broker.region_name) place.region = broker.region_name;
	if (broker.endpoint_url) place.endpoint = broker.endpoint_url;
	if (withCredentials && broker.credentials)
		place.credentials = {
			accessKeyId: broker.credentials.access_key_id,
			secretAccessKey: broker.credentials.secret_access_key
		};
	return place;
}
