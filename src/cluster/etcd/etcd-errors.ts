/**
 * What the etcd client throws (docs/architecture.md, "Ownership and cluster mode"). Outcomes the caller
 * acts on are data in the answers (a txn whose compares failed, a lease that is gone); these are for the
 * cases where etcd gave no answer to act on.
 */

/** gRPC status codes that the gateway reports and the client tells apart. */
export const GRPC_DEADLINE_EXCEEDED = 4;
export const GRPC_NOT_FOUND = 5;
export const GRPC_OUT_OF_RANGE = 11;
export const GRPC_UNAVAILABLE = 14;

/** The reason one endpoint gave no answer. */
export interface EndpointFailure {
  endpoint: string;
  reason: string;
}

/**
 * No endpoint answered. `outcomeUnknown` says that a write may have been applied anyway: it reached an
 * endpoint that then timed out or dropped the connection, so it was not sent again elsewhere; the caller
 * finds out by reading (an ownership claim reads its key and looks at the lease).
 */
export class EtcdUnavailableError extends Error {
  override readonly name = "EtcdUnavailableError";
  constructor(
    readonly operation: string,
    readonly failures: EndpointFailure[],
    readonly outcomeUnknown: boolean,
  ) {
    super(
      `etcd ${operation}: no endpoint answered (${failures.map((f) => `${f.endpoint}: ${f.reason}`).join("; ")})` +
        (outcomeUnknown ? "; the write may have been applied" : ""),
    );
  }
}

/** etcd answered with an error (a bad request, a lease that does not exist for a put, a compacted revision). */
export class EtcdServerError extends Error {
  override readonly name = "EtcdServerError";
  constructor(
    readonly operation: string,
    readonly endpoint: string,
    /** The gRPC status code. */
    readonly code: number,
    readonly serverMessage: string,
  ) {
    super(`etcd ${operation} at ${endpoint}: ${serverMessage} (gRPC code ${code})`);
  }

  /** "etcdserver: requested lease not found": a put or keep-alive under a lease that expired or was revoked. */
  get leaseNotFound(): boolean {
    return this.code === GRPC_NOT_FOUND && this.serverMessage.includes("lease not found");
  }

  /** "mvcc: required revision has been compacted". */
  get compacted(): boolean {
    return this.code === GRPC_OUT_OF_RANGE;
  }
}
