/**
 * What a handler is. One file per API key implements one; the registry collects them and derives the
 * ApiVersions answer from their version ranges.
 */
import type { ConnectionSecurity } from "../domain/security/connection-security.ts";
import type { RequestHeader } from "../protocol/generated/request-header.ts";

export interface ConnectionInfo {
  id: number;
  remoteAddress: string;
  close(): void;
  /**
   * The request's room in the listener's bounds on response bytes held (docs/architecture.md, "Request
   * path"); absent when nothing bounds them (a test calling dispatch directly).
   */
  responseBudget?: ResponseBudget;
  /**
   * The listener, its security protocol and the principal (domain/security/connection-security.ts); one
   * object for the connection's life. Absent (a test calling dispatch directly): PLAINTEXT, anonymous.
   */
  security?: ConnectionSecurity;
}

/** See net/kafka-listener.ts, which implements it: reserve before building a large response, adjust after. */
export interface ResponseBudget {
  /** Reserves up to `wantedBytes`; returns the bytes granted (0 when there is no room). */
  reserve(wantedBytes: number): number;
  /** Corrects the reservation by `deltaBytes` once the real size is known (negative gives room back). */
  adjust(deltaBytes: number): void;
  /** True when nothing else on the connection holds response bytes: one batch past the grant is allowed. */
  mayExceed(): boolean;
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
  /**
   * The encoded size of `response`, or a close upper bound, so that it is encoded into one buffer of that
   * size instead of one that doubles as it fills (large answers: Fetch). Absent: the buffer grows.
   */
  responseSizeHint?(response: Response, apiVersion: number): number;
  /**
   * Byte fields at least this long are written to the socket from where they are instead of copied into
   * the frame (protocol/gathered-frame.ts): the memory they point into must then stay unchanged until
   * `responseEncoded`. Absent: everything is copied.
   */
  gatherBytesMin?: number;
  /**
   * Called once nothing refers to what `response` pointed into any more, so that it may be reused: right
   * after encoding (or failing to), or, when the frame gathered some of it, once the kernel took the whole
   * frame. Never called for a gathered frame whose connection closed first.
   */
  responseEncoded?(response: Response): void;
}

/**
 * Thrown by a handler that must close the connection instead of answering (Produce with acks=0 after an
 * error, as Apache does). The listener writes the responses to earlier requests first, then closes.
 */
export class CloseConnection extends Error {
  override readonly name = "CloseConnection";
}
