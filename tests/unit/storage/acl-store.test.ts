/**
 * The ACL store: durable creates and deletes (each binding once), refresh from a file another broker
 * wrote, and a damaged file refused at open instead of read as no ACLs.
 */
import { describe, expect, test } from "bun:test";
import { type AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType } from "../../../src/domain/security/acl.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { AclStore } from "../../../src/storage/acl-store.ts";
import { saveState } from "../../../src/storage/state-file.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const DATA = "/data";
const read: AclBinding = {
  resourceType: ResourceType.TOPIC,
  resourceName: "t",
  patternType: PatternType.LITERAL,
  principal: "User:alice",
  host: "*",
  operation: AclOperation.READ,
  permissionType: AclPermissionType.ALLOW,
};
const write: AclBinding = { ...read, operation: AclOperation.WRITE };
const anyFilter = { resourceType: ResourceType.ANY, resourceName: null, patternType: PatternType.ANY, principal: null, host: null, operation: AclOperation.ANY, permissionType: AclPermissionType.ANY };

describe("AclStore", () => {
  test("creates are durable, each binding once, and survive a crash", async () => {
    const fs = new MemoryFs();
    const store = await AclStore.open(fs, DATA);
    expect(store.list()).toEqual([]);
    await store.create([read, read]);
    await store.create([read, write]);
    expect(store.list()).toEqual([read, write]);
    fs.crash();
    expect((await AclStore.open(fs, DATA)).list()).toEqual([read, write]);
  });

  test("delete removes what each filter matches and reports it per filter", async () => {
    const fs = new MemoryFs();
    const store = await AclStore.open(fs, DATA);
    await store.create([read, write]);
    const removed = await store.delete([{ ...anyFilter, operation: AclOperation.WRITE }, anyFilter]);
    expect(removed).toEqual([[write], [read, write]]);
    expect(store.list()).toEqual([]);
    expect((await AclStore.open(fs, DATA)).list()).toEqual([]);
  });

  test("refresh reads another broker's change; onChange reports only this store's", async () => {
    const fs = new MemoryFs();
    const mine = await AclStore.open(fs, DATA);
    const theirs = await AclStore.open(fs, DATA);
    let changes = 0;
    mine.onChange(() => changes++);
    await theirs.create([read]);
    expect(mine.list()).toEqual([]);
    expect(await mine.refresh()).toBe(true);
    expect(mine.list()).toEqual([read]);
    expect(await mine.refresh()).toBe(false);
    expect(changes).toBe(0);
    await mine.create([write]);
    expect(changes).toBe(1);
  });

  test("a damaged file is refused at open, and kept at refresh", async () => {
    const fs = new MemoryFs();
    const store = await AclStore.open(fs, DATA);
    await store.create([read]);
    await saveState(fs, `${DATA}/__cluster/acls.json`, "acls", 1, { acls: [{ ...read, principal: "alice" }] });
    await expect(AclStore.open(fs, DATA)).rejects.toBeInstanceOf(CorruptStateError);
    await expect(store.refresh()).rejects.toBeInstanceOf(CorruptStateError);
    expect(store.list()).toEqual([read]);
    const bytes = new TextEncoder().encode('{"format":"acls","version":1,"crc32":1,"body":{"acls":[]}}\n');
    const handle = await fs.open(`${DATA}/__cluster/acls.json`, "w");
    await handle.write(bytes, 0);
    await handle.close();
    await expect(AclStore.open(fs, DATA)).rejects.toBeInstanceOf(CorruptStateError);
  });

  test("a failed write changes nothing and poisons the store", async () => {
    const fs = new MemoryFs();
    const store = await AclStore.open(fs, DATA);
    fs.failNextWrite(`${DATA}/__cluster`);
    await expect(store.create([read])).rejects.toThrow();
    expect(store.list()).toEqual([]);
    await expect(store.create([write])).rejects.toThrow("failed earlier");
  });

  test("an invalid binding is a caller bug", async () => {
    const store = await AclStore.open(new MemoryFs(), DATA);
    await expect(store.create([{ ...read, resourceName: "" }])).rejects.toBeInstanceOf(TypeError);
  });
});
