/**
 * What the @platformatic/kafka interop helpers (eos-copier-platformatic.ts, txn-zombie-platformatic.ts) share.
 */

/**
 * InitProducerId's (producerId, epoch) for a producer that has none yet, as Producer options. Unset,
 * @platformatic/kafka 2.12.1 sends (0, 0), which InitProducerId v3+ reads as "I am producer 0 at epoch 0":
 * when a restart finds the previous instance's transaction open, the first InitProducerId fences it
 * (CONCURRENT_TRANSACTIONS) and the retry is answered PRODUCER_FENCED, by Apache Kafka 4.1.1 as by bunka.
 * (-1, -1) is what the Java client sends for a new session.
 */
export const NEW_SESSION = { producerId: -1n, producerEpoch: -1 } as const;

/** The error and everything it wraps (an AggregateError's errors, a cause), on one line. */
export function describeError(e: unknown, depth = 0): string {
  const error = e as Error & { code?: unknown; apiCode?: unknown; errors?: unknown[]; cause?: unknown };
  let line = `${error.name ?? "Error"} code=${String(error.code)}${error.apiCode === undefined ? "" : ` apiCode=${String(error.apiCode)}`} ${error.message}`;
  if (depth < 3) {
    const inner = [...(error.errors ?? []), ...(error.cause === undefined ? [] : [error.cause])];
    if (inner.length > 0) line += ` [${inner.map((c) => describeError(c, depth + 1)).join(" | ")}]`;
  }
  return line.replace(/\n/g, " ");
}
