/**
 * The broker's authorizer (broker/authorizer.ts): off without authorizer.class.name (everything allowed,
 * every supported operation reported, no ACL file read); on, the connection's principal and its client's
 * address as Apache prints it; config resources answer the error of their type; a damaged ACL file
 * refuses the start.
 */
import { describe, expect, test } from "bun:test";
import { BrokerAuthorizer, identityOf } from "../../../src/broker/authorizer.ts";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import type { RequestContext } from "../../../src/broker/handler.ts";
import { STANDARD_AUTHORIZER_CLASS } from "../../../src/domain/security/acl-authorizer.ts";
import { AclOperation as Op, AclPermissionType as Perm, PatternType as Pat, ResourceType as Res } from "../../../src/domain/security/acl.ts";
import { CorruptStateError } from "../../../src/errors/errors.ts";
import { ErrorCode } from "../../../src/errors/generated/error-codes.ts";
import { silentLogger } from "../../../src/platform/logger.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

const ctx = (remoteAddress: string, principal?: string): RequestContext =>
  ({
    header: undefined as never,
    apiVersion: 0,
    connection: { id: 1, remoteAddress, close() {}, ...(principal === undefined ? {} : { security: { listenerName: "SASL", securityProtocol: "SASL_PLAINTEXT", principal, authenticated: true } }) },
  }) as RequestContext;
const config = (over = {}) => ({ ...defaultBrokerConfig(), dataDir: "/data", ...over });

describe("BrokerAuthorizer", () => {
  test("off: allows everything, reports every supported operation, reads no ACL file", async () => {
    const fs = new MemoryFs();
    const authorizer = await BrokerAuthorizer.open(fs, config(), silentLogger);
    expect(authorizer.enabled).toBe(false);
    expect(authorizer.allows(ctx("10.0.0.1"), Op.DELETE, Res.TOPIC, "t")).toBe(true);
    expect(authorizer.allowsSomeResource(ctx("10.0.0.1"), Op.WRITE, Res.TOPIC)).toBe(true);
    expect(authorizer.authorizedOperations(ctx("10.0.0.1"), Res.GROUP, "g")).toBe([3, 6, 8, 10, 11].reduce((a, op) => a | (1 << op), 0));
    expect(await fs.stat("/data/__cluster/acls.json")).toBeUndefined();
  });

  test("the principal and host: ANONYMOUS without security, the SASL principal, an IPv4 client without its IPv6 mapping", () => {
    expect(identityOf(ctx("::ffff:10.0.0.1"))).toEqual({ principal: "User:ANONYMOUS", host: "10.0.0.1" });
    expect(identityOf(ctx("10.0.0.1", "User:alice"))).toEqual({ principal: "User:alice", host: "10.0.0.1" });
    expect(identityOf(ctx("::1")).host).toBe("::1");
  });

  test("on: decides with the ACLs, per principal and host; config resources answer their type's error", async () => {
    const authorizer = await BrokerAuthorizer.open(new MemoryFs(), config({ authorizerClassName: STANDARD_AUTHORIZER_CLASS }), silentLogger);
    await authorizer.create([{ resourceType: Res.TOPIC, resourceName: "t", patternType: Pat.LITERAL, principal: "User:alice", host: "10.0.0.1", operation: Op.READ, permissionType: Perm.ALLOW }]);
    expect(authorizer.allows(ctx("::ffff:10.0.0.1", "User:alice"), Op.READ, Res.TOPIC, "t")).toBe(true);
    expect(authorizer.allows(ctx("10.0.0.2", "User:alice"), Op.READ, Res.TOPIC, "t")).toBe(false);
    expect(authorizer.allows(ctx("10.0.0.1"), Op.READ, Res.TOPIC, "t")).toBe(false);
    expect(authorizer.configResourceError(ctx("10.0.0.1", "User:alice"), Op.DESCRIBE_CONFIGS, 2, "t")).toBe(ErrorCode.TOPIC_AUTHORIZATION_FAILED);
    expect(authorizer.configResourceError(ctx("10.0.0.1"), Op.ALTER_CONFIGS, 4, "0")).toBe(ErrorCode.CLUSTER_AUTHORIZATION_FAILED);
    expect(authorizer.configResourceError(ctx("10.0.0.1"), Op.ALTER_CONFIGS, 32, "g")).toBe(ErrorCode.GROUP_AUTHORIZATION_FAILED);
  });

  test("super users are allowed everything", async () => {
    const authorizer = await BrokerAuthorizer.open(new MemoryFs(), config({ authorizerClassName: STANDARD_AUTHORIZER_CLASS, superUsers: ["User:admin"] }), silentLogger);
    expect(authorizer.allows(ctx("1.2.3.4", "User:admin"), Op.ALTER, Res.CLUSTER, "kafka-cluster")).toBe(true);
    expect(authorizer.allows(ctx("1.2.3.4", "User:alice"), Op.ALTER, Res.CLUSTER, "kafka-cluster")).toBe(false);
  });

  test("a refusal is logged with the principal, host, operation, resource and request, at most 20 per 10 s; quiet checks are not", async () => {
    const lines: Record<string, unknown>[] = [];
    const log = { ...silentLogger, info: (message: string, fields?: Record<string, unknown>) => void (message === "authorization denied" && lines.push(fields ?? {})) };
    let nowMs = 0;
    const authorizer = await BrokerAuthorizer.open(new MemoryFs(), config({ authorizerClassName: STANDARD_AUTHORIZER_CLASS }), log, () => nowMs);
    const fetch = { ...ctx("10.0.0.1", "User:bob"), header: { requestApiKey: 1 } } as unknown as RequestContext;
    expect(authorizer.allows(fetch, Op.READ, Res.TOPIC, "orders")).toBe(false);
    expect(lines).toEqual([{ principal: "User:bob", host: "10.0.0.1", operation: "READ", resource: "TOPIC:orders", request: "Fetch" }]);
    expect(authorizer.allows(fetch, Op.DESCRIBE, Res.TOPIC, "orders", { quiet: true })).toBe(false);
    expect(lines.length).toBe(1);
    for (let i = 0; i < 30; i++) authorizer.allows(fetch, Op.READ, Res.TOPIC, `t${i}`);
    expect(lines.length).toBe(20);
    nowMs = 10_000;
    authorizer.allows(fetch, Op.READ, Res.TOPIC, "later");
    expect(lines.at(-1)).toMatchObject({ resource: "TOPIC:later", linesDropped: 11 });
  });

  test("a damaged ACL file refuses the start", async () => {
    const fs = new MemoryFs();
    await fs.mkdirp("/data/__cluster");
    const handle = await fs.open("/data/__cluster/acls.json", "w");
    await handle.write(new TextEncoder().encode("not json\n"), 0);
    await handle.close();
    await expect(BrokerAuthorizer.open(fs, config({ authorizerClassName: STANDARD_AUTHORIZER_CLASS }), silentLogger)).rejects.toBeInstanceOf(CorruptStateError);
    // Off, the file is not read at all.
    expect((await BrokerAuthorizer.open(fs, config(), silentLogger)).enabled).toBe(false);
  });
});
