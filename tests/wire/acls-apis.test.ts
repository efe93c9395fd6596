/**
 * CreateAcls (30), DescribeAcls (29) and DeleteAcls (31) with raw frames against an in-process broker:
 * without an authorizer SECURITY_DISABLED with Apache's messages; with StandardAuthorizer the ACLs are
 * created, described by filter, deleted with the matching ACLs returned, durable across a restart, and
 * the three need CLUSTER ALTER / DESCRIBE. Every connection is User:ANONYMOUS here.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { STANDARD_AUTHORIZER_CLASS } from "../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../src/domain/security/acl.ts";
import { ErrorCode } from "../../src/errors/generated/error-codes.ts";
import { buildBatch } from "../support/batch-builder.ts";
import { startTestBroker, type TestBroker } from "../support/test-broker.ts";
import { WireClient } from "../support/wire-client.ts";

const creation = (over: Record<string, unknown> = {}) => ({
  resourceType: Res.TOPIC,
  resourceName: "t",
  resourcePatternType: Pat.LITERAL,
  principal: "User:alice",
  host: "*",
  operation: Op.READ,
  permissionType: Perm.ALLOW,
  ...over,
});
const anyFilter = {
  resourceTypeFilter: Res.ANY,
  resourceNameFilter: null,
  patternTypeFilter: Pat.ANY,
  principalFilter: null,
  hostFilter: null,
  operation: Op.ANY,
  permissionType: Perm.ANY,
};

describe("without an authorizer", () => {
  let broker: TestBroker;
  let client: WireClient;
  beforeAll(async () => {
    broker = await startTestBroker();
    client = await WireClient.connect(broker.port);
  });
  afterAll(async () => {
    client.close();
    await broker.stop();
  });

  test("the three answer SECURITY_DISABLED with Apache's messages", async () => {
    const described = await client.request(29, 3, anyFilter);
    expect([described.errorCode, described.errorMessage]).toEqual([ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker"]);
    const created = await client.request(30, 3, { creations: [creation(), creation()] });
    expect(created.results.map((r: { errorCode: number; errorMessage: string }) => [r.errorCode, r.errorMessage])).toEqual([
      [ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."],
      [ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."],
    ]);
    const deleted = await client.request(31, 3, { filters: [anyFilter] });
    expect(deleted.filterResults.map((r: { errorCode: number; errorMessage: string }) => [r.errorCode, r.errorMessage])).toEqual([[ErrorCode.SECURITY_DISABLED, "No Authorizer is configured."]]);
  });
});

describe("without an authorizer, Produce", () => {
  test("refuses transactional records without a transactional id, as Apache's KafkaApis does", async () => {
    const broker = await startTestBroker();
    const client = await WireClient.connect(broker.port);
    try {
      const records = buildBatch({ records: [{ value: "v" }], producerId: 5, producerEpoch: 0, baseSequence: 0, transactional: true });
      const res = await client.request(0, 9, { transactionalId: null, acks: -1, timeoutMs: 5000, topicData: [{ name: "t", partitionData: [{ index: 0, records }] }] });
      expect(res.responses[0].partitionResponses[0].errorCode).toBe(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    } finally {
      client.close();
      await broker.stop();
    }
  });
});

describe("with StandardAuthorizer, ANONYMOUS a super user", () => {
  let broker: TestBroker;
  let client: WireClient;
  beforeAll(async () => {
    broker = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, superUsers: ["User:ANONYMOUS"] });
    client = await WireClient.connect(broker.port);
  });
  afterAll(async () => {
    client.close();
    await broker.stop();
  });

  test("create, describe by filter, delete returning what it removed, durable across a restart", async () => {
    const created = await client.request(30, 3, {
      creations: [
        creation(),
        creation({ operation: Op.WRITE }),
        creation({ resourceName: "pre", resourcePatternType: Pat.PREFIXED, permissionType: Perm.DENY }),
        creation({ resourceType: Res.GROUP, resourceName: "g" }),
      ],
    });
    expect(created.results.map((r: { errorCode: number }) => r.errorCode)).toEqual([0, 0, 0, 0]);
    // Creating one that exists is a success that adds nothing.
    expect((await client.request(30, 3, { creations: [creation()] })).results[0].errorCode).toBe(0);

    const all = await client.request(29, 3, anyFilter);
    expect(all.errorCode).toBe(ErrorCode.NONE);
    expect(all.resources.map((r: { resourceType: number; resourceName: string; patternType: number; acls: unknown[] }) => [r.resourceType, r.resourceName, r.patternType, r.acls.length])).toEqual([
      [Res.TOPIC, "t", Pat.LITERAL, 2],
      [Res.TOPIC, "pre", Pat.PREFIXED, 1],
      [Res.GROUP, "g", Pat.LITERAL, 1],
    ]);
    expect(all.resources[0].acls[1]).toMatchObject({ principal: "User:alice", host: "*", operation: Op.WRITE, permissionType: Perm.ALLOW });

    // MATCH: what applies to the topic "prefix-1".
    const matching = await client.request(29, 3, { ...anyFilter, resourceTypeFilter: Res.TOPIC, resourceNameFilter: "prefix-1", patternTypeFilter: Pat.MATCH });
    expect(matching.resources.map((r: { resourceName: string }) => r.resourceName)).toEqual(["pre"]);
    const writes = await client.request(29, 3, { ...anyFilter, operation: Op.WRITE });
    expect(writes.resources.map((r: { acls: unknown[] }) => r.acls.length)).toEqual([1]);

    await broker.restart();
    client.close();
    client = await WireClient.connect(broker.port);
    expect((await client.request(29, 3, anyFilter)).resources.length).toBe(3);

    const deleted = await client.request(31, 3, { filters: [{ ...anyFilter, resourceTypeFilter: Res.TOPIC, resourceNameFilter: "t" }, { ...anyFilter, resourceTypeFilter: Res.GROUP }] });
    expect(deleted.filterResults.map((r: { errorCode: number; matchingAcls: { resourceName: string; operation: number }[] }) => [r.errorCode, r.matchingAcls.map((a) => `${a.resourceName}:${a.operation}`)])).toEqual([
      [0, [`t:${Op.READ}`, `t:${Op.WRITE}`]],
      [0, [`g:${Op.READ}`]],
    ]);
    const left = await client.request(29, 3, anyFilter);
    expect(left.resources.map((r: { resourceName: string }) => r.resourceName)).toEqual(["pre"]);
    // Nothing matches: no error, nothing removed.
    const none = await client.request(31, 3, { filters: [{ ...anyFilter, principalFilter: "User:nobody" }] });
    expect(none.filterResults).toMatchObject([{ errorCode: 0, matchingAcls: [] }]);
  });

  test("CreateAcls validation, per creation, Apache's messages", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ resourceType: Res.CLUSTER, resourceName: "c" }, "The only valid name for the CLUSTER resource is kafka-cluster"],
      [{ resourceName: "" }, "Invalid empty resource name"],
      [{ resourceType: Res.ANY }, "Invalid resourceType ANY"],
      [{ resourcePatternType: Pat.MATCH }, "Invalid patternType MATCH"],
      [{ resourcePatternType: Pat.ANY }, "Invalid patternType ANY"],
      [{ operation: Op.ANY }, "Invalid operation ANY"],
      [{ permissionType: Perm.ANY }, "Invalid permissionType ANY"],
      [{ operation: 77 }, "CreatableAcls contain unknown elements"],
      [{ principal: "alice" }, "Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)"],
    ];
    const res = await client.request(30, 3, { creations: [...cases.map(([over]) => creation(over)), creation({ resourceName: "valid" })] });
    expect(res.results.map((r: { errorCode: number; errorMessage: string | null }) => [r.errorCode, r.errorMessage])).toEqual([
      ...cases.map(([, message]) => [ErrorCode.INVALID_REQUEST, message]),
      [ErrorCode.NONE, ""],
    ]);
    const described = await client.request(29, 3, { ...anyFilter, resourceNameFilter: "valid" });
    expect(described.resources.length).toBe(1);
    await client.request(31, 3, { filters: [{ ...anyFilter, resourceNameFilter: "valid" }] });
  });

  test("filters with UNKNOWN elements are INVALID_REQUEST", async () => {
    expect((await client.request(29, 3, { ...anyFilter, operation: 0 })).errorCode).toBe(ErrorCode.INVALID_REQUEST);
    const deleted = await client.request(31, 3, { filters: [anyFilter, { ...anyFilter, resourceTypeFilter: 0 }] });
    expect(deleted.filterResults.map((r: { errorCode: number }) => r.errorCode)).toEqual([ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]);
  });

  test("v0: literal only, a filter of ANY reads as LITERAL", async () => {
    await client.request(30, 0, { creations: [creation({ resourceName: "v0" })] });
    const res = await client.request(29, 0, { ...anyFilter, resourceNameFilter: "v0" });
    expect(res.resources).toMatchObject([{ resourceName: "v0", acls: [{ operation: Op.READ }] }]);
    const deleted = await client.request(31, 0, { filters: [{ ...anyFilter, resourceNameFilter: "v0" }] });
    expect(deleted.filterResults[0].matchingAcls.length).toBe(1);
  });
});

describe("with StandardAuthorizer, ANONYMOUS not a super user", () => {
  let broker: TestBroker;
  let client: WireClient;
  beforeAll(async () => {
    broker = await startTestBroker({ authorizerClassName: STANDARD_AUTHORIZER_CLASS });
    client = await WireClient.connect(broker.port);
  });
  afterAll(async () => {
    client.close();
    await broker.stop();
  });

  const grant = (operation: number, permissionType: number = Perm.ALLOW) =>
    broker.broker.services.authorizer.create([{ resourceType: Res.CLUSTER, resourceName: "kafka-cluster", patternType: Pat.LITERAL, principal: "User:ANONYMOUS", host: "*", operation, permissionType }]);

  test("CLUSTER_AUTHORIZATION_FAILED without CLUSTER ALTER / DESCRIBE, allowed with them", async () => {
    expect((await client.request(29, 3, anyFilter)).errorCode).toBe(ErrorCode.CLUSTER_AUTHORIZATION_FAILED);
    expect((await client.request(30, 3, { creations: [creation(), creation()] })).results.map((r: { errorCode: number }) => r.errorCode)).toEqual([
      ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
      ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ]);
    expect((await client.request(31, 3, { filters: [anyFilter] })).filterResults[0].errorCode).toBe(ErrorCode.CLUSTER_AUTHORIZATION_FAILED);

    // ALTER implies DESCRIBE.
    await grant(Op.ALTER);
    expect((await client.request(30, 3, { creations: [creation()] })).results[0].errorCode).toBe(ErrorCode.NONE);
    expect((await client.request(29, 3, anyFilter)).errorCode).toBe(ErrorCode.NONE);
    // A DENY of DESCRIBE wins over the implied one.
    await grant(Op.DESCRIBE, Perm.DENY);
    expect((await client.request(29, 3, anyFilter)).errorCode).toBe(ErrorCode.CLUSTER_AUTHORIZATION_FAILED);
    expect((await client.request(31, 3, { filters: [{ ...anyFilter, resourceTypeFilter: Res.TOPIC }] })).filterResults[0].errorCode).toBe(ErrorCode.NONE);
  });
});
