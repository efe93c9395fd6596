/**
 * The SCRAM credential store (storage/scram-credential-store.ts) over the in-memory file system: durable
 * before it resolves, survives a crash, a damaged file refused and never replaced, refresh after another
 * broker's write, a failed fsync poisons the store; and the pure rules it applies
 * (domain/security/scram-credentials.ts), and the PLAIN users file's format (domain/security/sasl-plain.ts).
 */
import { describe, expect, test } from "bun:test";
import { CorruptStateError, FatalError } from "../../../src/errors/errors.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { parsePlainUsers } from "../../../src/domain/security/sasl-plain.ts";
import { describeCredentials, planAlteration } from "../../../src/domain/security/scram-credentials.ts";
import { saltedPassword, scramMechanism, storedKey, clientKey } from "../../../src/domain/security/scram.ts";
import { ScramCredentialStore } from "../../../src/storage/scram-credential-store.ts";
import { saveState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const SHA256 = scramMechanism("SCRAM-SHA-256")!;
const SHA512 = scramMechanism("SCRAM-SHA-512")!;
const salt = new TextEncoder().encode("salt");
const up = (name: string, mechanism = SHA256, iterations = 4096, password = "pw") => ({
  name,
  mechanism: mechanism.type,
  iterations,
  salt,
  saltedPassword: saltedPassword(mechanism, password, salt, iterations),
});
const PATH = "/data/__cluster/scram-credentials.json";

describe("ScramCredentialStore", () => {
  test("an alteration is durable before it resolves and survives a crash; the keys are derived from the salted password", async () => {
    const fs = new MemoryFs();
    const store = await ScramCredentialStore.open(fs, "/data");
    expect(store.all().size).toBe(0);
    await store.apply(planAlteration(store.all(), [], [up("alice"), up("bob", SHA512, 8192)]));
    fs.crash();
    const reopened = await ScramCredentialStore.open(fs, "/data");
    const alice = reopened.get("alice", "SCRAM-SHA-256")!;
    expect(alice.iterations).toBe(4096);
    expect(Buffer.from(alice.storedKey)).toEqual(Buffer.from(storedKey(SHA256, clientKey(SHA256, saltedPassword(SHA256, "pw", salt, 4096)))));
    expect(reopened.get("bob", "SCRAM-SHA-512")?.iterations).toBe(8192);
    expect(reopened.get("bob", "SCRAM-SHA-256")).toBeUndefined();
  });

  test("a deletion of the last credential removes the user", async () => {
    const fs = new MemoryFs();
    const store = await ScramCredentialStore.open(fs, "/data");
    await store.apply(planAlteration(store.all(), [], [up("alice")]));
    await store.apply(planAlteration(store.all(), [{ name: "alice", mechanism: 1 }], []));
    expect(store.all().has("alice")).toBe(false);
  });

  test("a damaged file is refused at open (CorruptStateError), and left as it is", async () => {
    const fs = new MemoryFs();
    const store = await ScramCredentialStore.open(fs, "/data");
    await store.apply(planAlteration(store.all(), [], [up("alice")]));
    const bytes = await fs.readFile(PATH);
    const damaged = new TextDecoder().decode(bytes).replace('"iterations":4096', '"iterations":4000');
    const handle = await fs.open(PATH, "w");
    await handle.write(new TextEncoder().encode(damaged));
    await handle.fsync();
    await handle.close();
    await expect(ScramCredentialStore.open(fs, "/data")).rejects.toBeInstanceOf(CorruptStateError);
    expect(new TextDecoder().decode(await fs.readFile(PATH))).toBe(damaged);
  });

  test("a body that passes its checksum but is wrong (a key of the wrong length) is refused too", async () => {
    const fs = new MemoryFs();
    await ScramCredentialStore.open(fs, "/data"); // makes the directory
    await saveState(fs, PATH, "scram-credentials", 1, { users: { alice: { "SCRAM-SHA-256": { salt: "c2FsdA==", storedKey: "c2FsdA==", serverKey: "c2FsdA==", iterations: 4096 } } } });
    await expect(ScramCredentialStore.open(fs, "/data")).rejects.toThrow(/storedKey has 4 bytes, expected 32/);
    await saveState(fs, PATH, "scram-credentials", 1, { users: { alice: { "SCRAM-SHA-1": {} } } });
    await expect(ScramCredentialStore.open(fs, "/data")).rejects.toThrow(/unknown mechanism/);
  });

  test("refresh reads another broker's change; a vanished file keeps what is held", async () => {
    const fs = new MemoryFs();
    const mine = await ScramCredentialStore.open(fs, "/data");
    const theirs = await ScramCredentialStore.open(fs, "/data");
    await theirs.apply(planAlteration(theirs.all(), [], [up("carol")]));
    expect(mine.get("carol", "SCRAM-SHA-256")).toBeUndefined();
    expect(await mine.refresh()).toBe(true);
    expect(mine.get("carol", "SCRAM-SHA-256")?.iterations).toBe(4096);
    expect(await mine.refresh()).toBe(false);
    await fs.unlink(PATH);
    await expect(mine.refresh()).rejects.toBeInstanceOf(CorruptStateError);
    expect(mine.get("carol", "SCRAM-SHA-256")).toBeDefined();
  });

  test("a crash at every file operation of an alteration leaves the old credentials or the new ones, never damage", async () => {
    let completed = false;
    for (let n = 0; !completed; n++) {
      if (n > 200) throw new Error("the alteration never completed");
      const fs = new MemoryFs();
      const store = await ScramCredentialStore.open(fs, "/data");
      await store.apply(planAlteration(store.all(), [], [up("alice")]));
      fs.haltAfterOps(n);
      try {
        await store.apply(planAlteration(store.all(), [{ name: "alice", mechanism: 1 }], [up("bob", SHA512)]));
        completed = true;
      } catch {
        // halted: the process "dies" here
      }
      fs.crash();
      const users = [...(await ScramCredentialStore.open(fs, "/data")).all().keys()];
      if (completed) expect(users).toEqual(["bob"]);
      else expect([["alice"], ["bob"]]).toContainEqual(users);
    }
  });

  test("a failed fsync fails the alteration, nothing changes in memory, and the store refuses further writes", async () => {
    const fs = new MemoryFs();
    const store = await ScramCredentialStore.open(fs, "/data");
    fs.failNextFsync();
    await expect(store.apply(planAlteration(store.all(), [], [up("alice")]))).rejects.toThrow();
    expect(store.get("alice", "SCRAM-SHA-256")).toBeUndefined();
    await expect(store.apply(planAlteration(store.all(), [], [up("bob")]))).rejects.toBeInstanceOf(FatalError);
  });
});

describe("planAlteration and describeCredentials (Apache's ScramControlManager / ScramImage)", () => {
  test("a user both deleted and upserted is a duplicate, and nothing of it is changed", () => {
    const plan = planAlteration(new Map(), [{ name: "a", mechanism: 1 }], [up("a")]);
    // The deletion of a missing credential fails first; the upsertion of an erred user is skipped.
    expect(plan.results).toEqual([{ user: "a", errorCode: ErrorCode.RESOURCE_NOT_FOUND, errorMessage: "Attempt to delete a user credential that does not exist" }]);
    const existing = new Map([["a", new Map([["SCRAM-SHA-256" as const, { salt, storedKey: salt, serverKey: salt, iterations: 4096 }]])]]);
    const twice = planAlteration(existing, [{ name: "a", mechanism: 1 }], [up("a", SHA512)]);
    expect(twice.results).toEqual([{ user: "a", errorCode: ErrorCode.DUPLICATE_RESOURCE, errorMessage: "A user credential cannot be altered twice in the same request" }]);
    expect(twice.deletions).toEqual([]);
    expect(twice.upsertions).toEqual([]);
  });

  test("the iteration bounds are 4096 and 16384 inclusive", () => {
    expect(planAlteration(new Map(), [], [up("a", SHA256, 4096)]).results[0]!.errorCode).toBe(0);
    expect(planAlteration(new Map(), [], [{ ...up("a"), iterations: 16384 }]).results[0]!.errorCode).toBe(0);
    expect(planAlteration(new Map(), [], [{ ...up("a"), iterations: 16385 }]).results[0]!.errorMessage).toBe("Too many iterations");
    expect(planAlteration(new Map(), [], [{ ...up("a"), iterations: 4095 }]).results[0]!.errorMessage).toBe("Too few iterations");
  });

  test("an unknown mechanism in a deletion", () => {
    expect(planAlteration(new Map(), [{ name: "a", mechanism: 0 }], []).results).toEqual([{ user: "a", errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, errorMessage: "Unknown SCRAM mechanism" }]);
  });

  test("describe with no users lists none when there are none; [] is every user", () => {
    expect(describeCredentials(new Map(), null)).toEqual([]);
    expect(describeCredentials(new Map(), [])).toEqual([]);
  });
});

describe("the PLAIN users file", () => {
  test("name=password lines, comments, blank lines, CRLF; a password may hold =", () => {
    expect(parsePlainUsers("# users\n\nalice=secret\r\n bob = p=ss \n")).toEqual({ ok: true, users: new Map([["alice", "secret"], ["bob", " p=ss "]]) });
  });

  const bad: [string, string, RegExp][] = [
    ["no =", "alice\n", /line 1: expected name=password/],
    ["empty name", "=pw\n", /line 1: empty user name/],
    ["empty password", "#\nalice=\n", /line 2: empty password for "alice"/],
    ["a user twice", "a=1\na=2\n", /line 2: user "a" given twice/],
  ];
  for (const [what, text, reason] of bad) {
    test(`refused: ${what}, naming the line and never a password`, () => {
      const parsed = parsePlainUsers(text);
      expect(parsed.ok).toBe(false);
      if (!parsed.ok) {
        expect(parsed.reason).toMatch(reason);
        expect(parsed.reason).not.toContain("2\n");
      }
    });
  }
});
