/**
 * The handlers bunka serves, by API key. The ApiVersions answer is derived from here, so a handler that is
 * not registered is never advertised, and one that is registered is advertised with exactly its range.
 */
import { apiCodecsByKey } from "../protocol/generated/index.ts";
import type { Handler } from "./handler.ts";

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

  apiVersions(): AdvertisedApi[] {
    return [...this.handlers.values()]
      .map((h) => ({ apiKey: h.apiKey, minVersion: h.minVersion, maxVersion: h.maxVersion }))
      .sort((a, b) => a.apiKey - b.apiKey);
  }
}
