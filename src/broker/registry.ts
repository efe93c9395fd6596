/**
 * The handlers bunka serves, by API key. The ApiVersions answer is derived from here, so a handler that is
 * not registered is never advertised, and one that is registered is advertised with exactly its range, save
 * the versions below that Apache Kafka 4 lists without serving them (LISTED_FROM).
 */
import { apiCodecsByKey } from "../protocol/generated/index.ts";
import type { Handler } from "./handler.ts";

/**
 * The lowest version listed in ApiVersions where it is below the lowest served, as Apache Kafka 4 lists it:
 * Produce from v0, though Kafka 4.0 removed v0-v2, because librdkafka decides from Produce v0-v2 whether the
 * broker takes gzip, snappy and lz4 (librdkafka 2.0, Debian 12's, sends such batches uncompressed, without
 * a word, when they are not listed). A request in a listed, unserved version closes the connection, as
 * Apache's does (dispatcher.ts).
 */
const LISTED_FROM: ReadonlyMap<number, number> = new Map([[0, 0]]);

export interface AdvertisedApi {
  apiKey: number;
  minVersion: number;
  maxVersion: number;
}

export class HandlerRegistry {
  private readonly handlers = new Map<number, Handler>();

  register(handler: Handler): this {
    const codecs = apiCodecsByKey.get(handler.apiKey);
    if (!codecs) throw new Error(`no codecs for API key ${handler.apiKey}`);
    if (handler.minVersion < codecs.minVersion || handler.maxVersion > codecs.maxVersion) {
      throw new Error(`handler for API key ${handler.apiKey} serves versions outside the schema`);
    }
    if (codecs.latestVersionUnstable && handler.maxVersion >= codecs.maxVersion) {
      // Apache does not advertise unstable versions by default; neither do we.
      throw new Error(`handler for API key ${handler.apiKey} advertises the unstable version ${codecs.maxVersion}`);
    }
    if (this.handlers.has(handler.apiKey)) throw new Error(`two handlers for API key ${handler.apiKey}`);
    this.handlers.set(handler.apiKey, handler);
    return this;
  }

  get(apiKey: number): Handler | undefined {
    return this.handlers.get(apiKey);
  }

  /** A version ApiVersions lists but the handler does not serve (LISTED_FROM). */
  listedNotServed(apiKey: number, version: number): boolean {
    const handler = this.handlers.get(apiKey);
    const listedFrom = LISTED_FROM.get(apiKey);
    return handler !== undefined && listedFrom !== undefined && version >= listedFrom && version < handler.minVersion;
  }

  apiVersions(): AdvertisedApi[] {
    return [...this.handlers.values()]
      .map((h) => ({ apiKey: h.apiKey, minVersion: Math.min(h.minVersion, LISTED_FROM.get(h.apiKey) ?? h.minVersion), maxVersion: h.maxVersion }))
      .sort((a, b) => a.apiKey - b.apiKey);
  }
}
