/**
 * Errors across the boundary between the broker's thread and a cleaner thread
 * (storage/log/cleaner-thread-messages.ts): the service tells damage from a failed fsync from anything
 * else by class, so each comes back as its own class with its message, file and cause.
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError, DecodeError, FatalError } from "../../../../src/errors/errors.ts";
import { deserializeError, serializeError } from "../../../../src/storage/log/cleaner-thread-messages.ts";

/** Through the structured clone a postMessage makes. */
function across(error: unknown): Error {
  return deserializeError(structuredClone(serializeError(error)));
}

describe("errors across the cleaner thread boundary", () => {
  test("a CorruptStateError keeps its class, file and message", () => {
    const back = across(new CorruptStateError("/data/t-0/00000000000000000000.log", "batch at position 70 fails its check (crc-mismatch)"));
    expect(back).toBeInstanceOf(CorruptStateError);
    expect((back as CorruptStateError).path).toBe("/data/t-0/00000000000000000000.log");
    expect(back.message).toBe("/data/t-0/00000000000000000000.log: batch at position 70 fails its check (crc-mismatch)");
  });

  test("a FatalError keeps its class and its cause's message; a DecodeError its class", () => {
    const fatal = across(new FatalError("fsync of /data/t-0/x.log.cleaned failed", { cause: new Error("EIO: i/o error") }));
    expect(fatal).toBeInstanceOf(FatalError);
    expect(fatal.message).toBe("fsync of /data/t-0/x.log.cleaned failed");
    expect((fatal.cause as Error).message).toBe("EIO: i/o error");
    expect(across(new DecodeError("record length -5"))).toBeInstanceOf(DecodeError);
  });

  test("any other error comes back a plain Error with its name and message, never one of the project's classes", () => {
    const back = across(new RangeError("no inactive segment based at 7 in /data/t-0"));
    expect(back).not.toBeInstanceOf(FatalError);
    expect(back).not.toBeInstanceOf(CorruptStateError);
    expect(back.name).toBe("RangeError");
    expect(back.message).toBe("no inactive segment based at 7 in /data/t-0");
    expect(across("a thrown string").message).toBe("a thrown string");
  });
});
