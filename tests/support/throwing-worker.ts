/**
 * A stand-in for the log cleaner's thread (storage/log/cleaner-worker.ts) that dies of an uncaught error
 * at its first pass, for tests of what the broker's thread does when its cleaner thread dies.
 */
addEventListener("message", (event: MessageEvent<{ kind: string }>) => {
  if (event.data.kind === "pass") {
    setTimeout(() => {
      throw new Error("the worker crashed on purpose");
    }, 0);
  }
});
