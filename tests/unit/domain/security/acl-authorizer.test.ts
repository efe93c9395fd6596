/**
 * StandardAuthorizer's decision rules (domain/security/acl-authorizer.ts) and the ACL filters and
 * validation of CreateAcls / DescribeAcls / DeleteAcls (domain/security/acl.ts).
 */
import { describe, expect, test } from "bun:test";
import { AclAuthorizerData, type AuthorizerSettings } from "../../../../src/domain/security/acl-authorizer.ts";
import {
  type AclBinding,
  type AclBindingFilter,
  AclOperation as Op,
  AclPermissionType as Perm,
  filterMatches,
  newBindingProblem,
  operationsBitField,
  parseSuperUsers,
  PatternType as Pat,
  ResourceType as Res,
  unknownElements,
} from "../../../../src/domain/security/acl.ts";

const alice = { principal: "User:alice", host: "10.0.0.1" };
const bob = { principal: "User:bob", host: "10.0.0.2" };
const strict: AuthorizerSettings = { superUsers: [], allowEveryoneIfNoAclFound: false };

function acl(over: Partial<AclBinding> = {}): AclBinding {
  return {
    resourceType: Res.TOPIC,
    resourceName: "orders",
    patternType: Pat.LITERAL,
    principal: "User:alice",
    host: "*",
    operation: Op.READ,
    permissionType: Perm.ALLOW,
    ...over,
  };
}
const topic = (operation: number, resourceName = "orders") => ({ operation, resourceType: Res.TOPIC, resourceName });

describe("authorize", () => {
  test("no ACL: denied by default, allowed with allow.everyone.if.no.acl.found", () => {
    expect(new AclAuthorizerData([], strict).authorize(alice, topic(Op.READ))).toBe(false);
    expect(new AclAuthorizerData([], { superUsers: [], allowEveryoneIfNoAclFound: true }).authorize(alice, topic(Op.READ))).toBe(true);
  });

  test("allow.everyone.if.no.acl.found does not apply once any ACL names the resource", () => {
    const data = new AclAuthorizerData([acl({ principal: "User:bob" })], { superUsers: [], allowEveryoneIfNoAclFound: true });
    expect(data.authorize(alice, topic(Op.READ))).toBe(false);
    expect(data.authorize(bob, topic(Op.READ))).toBe(true);
    // Another topic has no ACL: the setting decides.
    expect(data.authorize(alice, topic(Op.READ, "other"))).toBe(true);
  });

  test("a literal ALLOW allows its operation on its name only", () => {
    const data = new AclAuthorizerData([acl()], strict);
    expect(data.authorize(alice, topic(Op.READ))).toBe(true);
    expect(data.authorize(alice, topic(Op.WRITE))).toBe(false);
    expect(data.authorize(alice, topic(Op.READ, "orders2"))).toBe(false);
    expect(data.authorize(alice, topic(Op.READ, "order"))).toBe(false);
    expect(data.authorize(bob, topic(Op.READ))).toBe(false);
    expect(data.authorize(alice, { operation: Op.READ, resourceType: Res.GROUP, resourceName: "orders" })).toBe(false);
  });

  test("DENY wins over ALLOW", () => {
    const data = new AclAuthorizerData([acl(), acl({ permissionType: Perm.DENY })], strict);
    expect(data.authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("a prefixed DENY beats a literal ALLOW", () => {
    const data = new AclAuthorizerData([acl(), acl({ resourceName: "ord", patternType: Pat.PREFIXED, permissionType: Perm.DENY })], strict);
    expect(data.authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("PREFIXED matches names that start with it, including the name itself", () => {
    const data = new AclAuthorizerData([acl({ resourceName: "ord", patternType: Pat.PREFIXED })], strict);
    expect(data.authorize(alice, topic(Op.READ, "orders"))).toBe(true);
    expect(data.authorize(alice, topic(Op.READ, "ord"))).toBe(true);
    expect(data.authorize(alice, topic(Op.READ, "or"))).toBe(false);
    expect(data.authorize(alice, topic(Op.READ, "xorders"))).toBe(false);
  });

  test("the literal wildcard resource matches every name; a prefixed '*' only names starting with '*'", () => {
    const wildcard = new AclAuthorizerData([acl({ resourceName: "*" })], strict);
    expect(wildcard.authorize(alice, topic(Op.READ, "anything"))).toBe(true);
    const prefixedStar = new AclAuthorizerData([acl({ resourceName: "*", patternType: Pat.PREFIXED })], strict);
    expect(prefixedStar.authorize(alice, topic(Op.READ, "anything"))).toBe(false);
    expect(prefixedStar.authorize(alice, topic(Op.READ, "*x"))).toBe(true);
  });

  test("a wildcard DENY beats a literal ALLOW", () => {
    const data = new AclAuthorizerData([acl(), acl({ resourceName: "*", permissionType: Perm.DENY })], strict);
    expect(data.authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("the wildcard principal User:* matches everyone", () => {
    const data = new AclAuthorizerData([acl({ principal: "User:*" })], strict);
    expect(data.authorize(alice, topic(Op.READ))).toBe(true);
    expect(data.authorize(bob, topic(Op.READ))).toBe(true);
    const denyAll = new AclAuthorizerData([acl(), acl({ principal: "User:*", permissionType: Perm.DENY })], strict);
    expect(denyAll.authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("a host filter: the ACL applies only from that address", () => {
    const data = new AclAuthorizerData([acl({ host: "10.0.0.1" })], strict);
    expect(data.authorize(alice, topic(Op.READ))).toBe(true);
    expect(data.authorize({ principal: "User:alice", host: "10.0.0.9" }, topic(Op.READ))).toBe(false);
    const denyFromHost = new AclAuthorizerData([acl(), acl({ host: "10.0.0.9", permissionType: Perm.DENY })], strict);
    expect(denyFromHost.authorize(alice, topic(Op.READ))).toBe(true);
    expect(denyFromHost.authorize({ principal: "User:alice", host: "10.0.0.9" }, topic(Op.READ))).toBe(false);
  });

  test("ALL implies every operation, ALLOW and DENY alike", () => {
    const data = new AclAuthorizerData([acl({ operation: Op.ALL })], strict);
    for (const op of [Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS]) {
      expect(data.authorize(alice, topic(op))).toBe(true);
    }
    const denied = new AclAuthorizerData([acl({ operation: Op.ALL }), acl({ operation: Op.ALL, permissionType: Perm.DENY })], strict);
    expect(denied.authorize(alice, topic(Op.DESCRIBE))).toBe(false);
  });

  test("READ, WRITE, DELETE and ALTER imply DESCRIBE; CREATE does not", () => {
    for (const op of [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER]) {
      expect(new AclAuthorizerData([acl({ operation: op })], strict).authorize(alice, topic(Op.DESCRIBE))).toBe(true);
    }
    expect(new AclAuthorizerData([acl({ operation: Op.CREATE })], strict).authorize(alice, topic(Op.DESCRIBE))).toBe(false);
    expect(new AclAuthorizerData([acl({ operation: Op.DESCRIBE })], strict).authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("ALTER_CONFIGS implies DESCRIBE_CONFIGS, not the other way round", () => {
    expect(new AclAuthorizerData([acl({ operation: Op.ALTER_CONFIGS })], strict).authorize(alice, topic(Op.DESCRIBE_CONFIGS))).toBe(true);
    expect(new AclAuthorizerData([acl({ operation: Op.DESCRIBE_CONFIGS })], strict).authorize(alice, topic(Op.ALTER_CONFIGS))).toBe(false);
    expect(new AclAuthorizerData([acl({ operation: Op.ALTER })], strict).authorize(alice, topic(Op.DESCRIBE_CONFIGS))).toBe(false);
  });

  test("a DENY implies nothing: DENY READ leaves DESCRIBE to the ALLOWs", () => {
    const data = new AclAuthorizerData([acl({ operation: Op.WRITE }), acl({ permissionType: Perm.DENY })], strict);
    expect(data.authorize(alice, topic(Op.DESCRIBE))).toBe(true);
    expect(data.authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("super users are allowed everything, whatever the ACLs say", () => {
    const data = new AclAuthorizerData([acl({ principal: "User:*", operation: Op.ALL, permissionType: Perm.DENY, resourceName: "*" })], {
      superUsers: ["User:admin"],
      allowEveryoneIfNoAclFound: false,
    });
    expect(data.authorize({ principal: "User:admin", host: "1.2.3.4" }, topic(Op.DELETE))).toBe(true);
    expect(data.authorize({ principal: "User:admin", host: "1.2.3.4" }, { operation: Op.CLUSTER_ACTION, resourceType: Res.CLUSTER, resourceName: "kafka-cluster" })).toBe(true);
    expect(data.authorize(alice, topic(Op.READ))).toBe(false);
  });

  test("authorized operations: the supported operations allowed", () => {
    const data = new AclAuthorizerData([acl({ operation: Op.WRITE })], strict);
    expect(data.authorizedOperations(alice, Res.TOPIC, "orders").sort()).toEqual([Op.WRITE, Op.DESCRIBE].sort());
    expect(operationsBitField([Op.WRITE, Op.DESCRIBE])).toBe((1 << 4) | (1 << 8));
  });
});

describe("allowedOnSomeResource (authorizeByResourceType)", () => {
  const write = (acls: AclBinding[], settings = strict) => new AclAuthorizerData(acls, settings).allowedOnSomeResource(alice, Op.WRITE, Res.TOPIC);

  test("no ACL: the default decides", () => {
    expect(write([])).toBe(false);
    expect(write([], { superUsers: [], allowEveryoneIfNoAclFound: true })).toBe(true);
    expect(write([], { superUsers: ["User:alice"], allowEveryoneIfNoAclFound: false })).toBe(true);
  });

  test("an ALLOW on some topic, literal or prefixed", () => {
    expect(write([acl({ operation: Op.WRITE })])).toBe(true);
    expect(write([acl({ operation: Op.WRITE, patternType: Pat.PREFIXED, resourceName: "o" })])).toBe(true);
    expect(write([acl({ operation: Op.ALL })])).toBe(true);
    expect(write([acl({ operation: Op.READ })])).toBe(false);
    expect(write([acl({ operation: Op.WRITE, principal: "User:bob" })])).toBe(false);
  });

  test("a DENY that covers every ALLOW", () => {
    expect(write([acl({ operation: Op.WRITE }), acl({ operation: Op.WRITE, permissionType: Perm.DENY })])).toBe(false);
    expect(write([acl({ operation: Op.WRITE }), acl({ operation: Op.WRITE, permissionType: Perm.DENY, patternType: Pat.PREFIXED, resourceName: "or" })])).toBe(false);
    expect(write([acl({ operation: Op.WRITE, resourceName: "*" }), acl({ operation: Op.WRITE, permissionType: Perm.DENY, resourceName: "*" })])).toBe(false);
    // A literal DENY does not cover a prefixed ALLOW.
    expect(write([acl({ operation: Op.WRITE, patternType: Pat.PREFIXED }), acl({ operation: Op.WRITE, permissionType: Perm.DENY })])).toBe(true);
  });
});

describe("filters", () => {
  const any: AclBindingFilter = { resourceType: Res.ANY, resourceName: null, patternType: Pat.ANY, principal: null, host: null, operation: Op.ANY, permissionType: Perm.ANY };

  test("ANY matches everything; each field narrows", () => {
    expect(filterMatches(any, acl())).toBe(true);
    expect(filterMatches({ ...any, resourceType: Res.GROUP }, acl())).toBe(false);
    expect(filterMatches({ ...any, principal: "User:bob" }, acl())).toBe(false);
    expect(filterMatches({ ...any, host: "10.0.0.1" }, acl())).toBe(false);
    expect(filterMatches({ ...any, operation: Op.WRITE }, acl())).toBe(false);
    expect(filterMatches({ ...any, permissionType: Perm.DENY }, acl())).toBe(false);
  });

  test("a name with ANY or the ACL's own pattern type compares names as written", () => {
    expect(filterMatches({ ...any, resourceName: "orders" }, acl())).toBe(true);
    expect(filterMatches({ ...any, resourceName: "orders" }, acl({ resourceName: "*" }))).toBe(false);
    expect(filterMatches({ ...any, resourceName: "ord", patternType: Pat.PREFIXED }, acl({ resourceName: "ord", patternType: Pat.PREFIXED }))).toBe(true);
    expect(filterMatches({ ...any, resourceName: "orders", patternType: Pat.PREFIXED }, acl())).toBe(false);
  });

  test("MATCH selects every ACL that applies to the name: literal, wildcard, prefixes", () => {
    const match = { ...any, resourceName: "orders", patternType: Pat.MATCH };
    expect(filterMatches(match, acl())).toBe(true);
    expect(filterMatches(match, acl({ resourceName: "*" }))).toBe(true);
    expect(filterMatches(match, acl({ resourceName: "ord", patternType: Pat.PREFIXED }))).toBe(true);
    expect(filterMatches(match, acl({ resourceName: "orders-x", patternType: Pat.PREFIXED }))).toBe(false);
    expect(filterMatches(match, acl({ resourceName: "other" }))).toBe(false);
  });
});

describe("validation", () => {
  test("CreateAcls refusals, Apache's messages", () => {
    expect(newBindingProblem(acl())).toBeNull();
    expect(newBindingProblem(acl({ resourceType: Res.CLUSTER, resourceName: "x" }))).toBe("The only valid name for the CLUSTER resource is kafka-cluster");
    expect(newBindingProblem(acl({ resourceType: Res.CLUSTER, resourceName: "kafka-cluster" }))).toBeNull();
    expect(newBindingProblem(acl({ resourceName: "" }))).toBe("Invalid empty resource name");
    expect(newBindingProblem(acl({ resourceType: Res.ANY }))).toBe("Invalid resourceType ANY");
    expect(newBindingProblem(acl({ patternType: Pat.MATCH }))).toBe("Invalid patternType MATCH");
    expect(newBindingProblem(acl({ patternType: Pat.ANY }))).toBe("Invalid patternType ANY");
    expect(newBindingProblem(acl({ operation: Op.ANY }))).toBe("Invalid operation ANY");
    expect(newBindingProblem(acl({ permissionType: Perm.ANY }))).toBe("Invalid permissionType ANY");
    expect(newBindingProblem(acl({ principal: "alice" }))).toBe("Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)");
    expect(newBindingProblem(acl({ principal: "Group:x" }))).toBeNull();
  });

  test("UNKNOWN elements, including codes Apache does not know", () => {
    expect(unknownElements({ resourceType: Res.TOPIC, patternType: Pat.LITERAL, operation: Op.READ, permissionType: Perm.ALLOW })).toBe(false);
    expect(unknownElements({ resourceType: 0, patternType: Pat.LITERAL, operation: Op.READ, permissionType: Perm.ALLOW })).toBe(true);
    expect(unknownElements({ resourceType: Res.TOPIC, patternType: 9, operation: Op.READ, permissionType: Perm.ALLOW })).toBe(true);
    expect(unknownElements({ resourceType: Res.TOPIC, patternType: Pat.LITERAL, operation: 99, permissionType: Perm.ALLOW })).toBe(true);
  });

  test("super.users is a semicolon-separated list", () => {
    expect(parseSuperUsers("User:admin; User:broker;;")).toEqual(["User:admin", "User:broker"]);
    expect(parseSuperUsers("")).toEqual([]);
  });
});
