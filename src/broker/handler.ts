/**
 * What a handler is. One file per API key implements one; the registry collects them and derives the
 * ApiVersions answer from their version ranges.
 */
import type { RequestHeader } from "../protocol/generated/request-header.ts";

export interface ConnectionInfo {
  id: number;
  remoteAddress: string;
  close(): void;
}

export interface RequestContext {
  header: RequestHeader;
  apiVersion: number;
  connection: ConnectionInfo;
}

export interface Handler<Request = any, Response = any> {
  apiKey: number;
  /** The versions this handler serves: a sub-range of the schema's valid versions. */
  minVersion: number;
  maxVersion: number;
  /**
   * Handles a decoded request. Returns the response to encode at the request's version, or null when the
   * protocol sends none (Produce with acks=0).
   */
  handle(request: Request, ctx: RequestContext): Promise<Response | null> | Response | null;
  /**
   * The response that carries `errorCode` for every part of `request` (used when the version is not served,
   * in the shape Apache gives for that API).
   */
  errorResponse(request: Request, errorCode: number, apiVersion: number): Response;
}

/**
 * Thrown by a handler that must close the connection instead of answering (Produce with acks=0 after an
 * error, as Apache does). The listener writes the responses to earlier requests first, then closes.
 */
export class CloseConnection extends Error {
  override readonly name = "CloseConnection";
}
