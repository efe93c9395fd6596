/**
 * The authorization decision of Apache Kafka's StandardAuthorizer (StandardAuthorizerData), pure:
 *
 * - a principal named in `super.users` is allowed everything;
 * - otherwise every ACL of the resource's type whose pattern applies to the name takes part: a LITERAL
 *   one of the same name, the LITERAL wildcard `*`, a PREFIXED one the name starts with;
 * - among those, an ACL matches the request when its principal is the request's or `User:*`, its host
 *   the client's address or `*`, and its operation the one asked for, where ALL matches every operation
 *   and an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of ALTER_CONFIGS also
 *   DESCRIBE_CONFIGS (a DENY implies nothing: DENY READ does not deny DESCRIBE);
 * - a matching DENY wins over any ALLOW; else a matching ALLOW allows;
 * - when no ACL applies to the resource at all, `allow.everyone.if.no.acl.found` decides (default: deny);
 *   when some apply but none matches, the answer is deny whatever that setting says.
 *
 * `allowedOnSomeResource` is Apache's Authorizer.authorizeByResourceType (InitProducerId without a
 * transactional id asks it for WRITE on any topic).
 */
import {
  type AclBinding,
  AclOperation,
  AclPermissionType,
  PatternType,
  patternMatchesName,
  SUPPORTED_OPERATIONS,
  WILDCARD,
  WILDCARD_PRINCIPAL,
} from "./acl.ts";

/** The one authorizer.class.name bunka accepts: Apache's KRaft authorizer, whose rules these are. */
export const STANDARD_AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

export interface AuthorizerSettings {
  /** super.users: principals ("User:admin") allowed everything. */
  superUsers: readonly string[];
  /** allow.everyone.if.no.acl.found: the answer for a resource no ACL applies to. */
  allowEveryoneIfNoAclFound: boolean;
}

/** Who asks: the connection's principal and its client's address. */
export interface RequestIdentity {
  principal: string;
  host: string;
}

/** An action: an operation on one named resource of a type (always a literal name). */
export interface AclAction {
  operation: number;
  resourceType: number;
  resourceName: string;
}

const IMPLIES_DESCRIBE: ReadonlySet<number> = new Set([AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER]);
const IMPLIES_DESCRIBE_CONFIGS: ReadonlySet<number> = new Set([AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS]);

/**
 * What one ACL says about an action whose resource it applies to: "allow", "deny", or undefined when
 * its principal, host or operation does not match (Apache's findResult).
 */
export function aclResult(acl: AclBinding, who: RequestIdentity, operation: number): "allow" | "deny" | undefined {
  if (acl.principal !== who.principal && acl.principal !== WILDCARD_PRINCIPAL) return undefined;
  if (acl.host !== WILDCARD && acl.host !== who.host) return undefined;
  const allow = acl.permissionType === AclPermissionType.ALLOW;
  if (acl.operation !== AclOperation.ALL) {
    if (allow && operation === AclOperation.DESCRIBE) {
      if (!IMPLIES_DESCRIBE.has(acl.operation)) return undefined;
    } else if (allow && operation === AclOperation.DESCRIBE_CONFIGS) {
      if (!IMPLIES_DESCRIBE_CONFIGS.has(acl.operation)) return undefined;
    } else if (acl.operation !== operation) {
      return undefined;
    }
  }
  return allow ? "allow" : "deny";
}

/** Decisions remembered per snapshot; past this many the memory starts again (a bound, not an LRU). */
const DECISIONS_REMEMBERED_MAX = 10_000;

/**
 * The ACLs held, indexed by resource type, and the settings: one immutable snapshot. A decision is a scan
 * of the type's ACLs; it is remembered, since Produce and Fetch ask the same ones at every request.
 */
export class AclAuthorizerData {
  private readonly byType = new Map<number, AclBinding[]>();
  private readonly superUsers: ReadonlySet<string>;
  private readonly decisions = new Map<string, boolean>();

  constructor(
    acls: readonly AclBinding[],
    private readonly settings: AuthorizerSettings,
  ) {
    for (const acl of acls) {
      const list = this.byType.get(acl.resourceType);
      if (list === undefined) this.byType.set(acl.resourceType, [acl]);
      else list.push(acl);
    }
    this.superUsers = new Set(settings.superUsers);
  }

  isSuperUser(principal: string): boolean {
    return this.superUsers.has(principal);
  }

  /** Whether `who` may perform `action` (see the file comment). */
  authorize(who: RequestIdentity, action: AclAction): boolean {
    if (this.isSuperUser(who.principal)) return true;
    const key = `${who.principal}\u0000${who.host}\u0000${action.operation}\u0000${action.resourceType}\u0000${action.resourceName}`;
    const known = this.decisions.get(key);
    if (known !== undefined) return known;
    const decided = this.decide(who, action);
    if (this.decisions.size >= DECISIONS_REMEMBERED_MAX) this.decisions.clear();
    this.decisions.set(key, decided);
    return decided;
  }

  private decide(who: RequestIdentity, action: AclAction): boolean {
    let applies = false;
    let allowed = false;
    for (const acl of this.byType.get(action.resourceType) ?? []) {
      if (!patternMatchesName(acl, action.resourceName)) continue;
      applies = true;
      const result = aclResult(acl, who, action.operation);
      if (result === "deny") return false;
      if (result === "allow") allowed = true;
    }
    if (allowed) return true;
    return !applies && this.settings.allowEveryoneIfNoAclFound;
  }

  /**
   * Whether `who` may perform `operation` on at least one resource of `resourceType` (Apache's
   * authorizeByResourceType): allowed on a name no ACL names (super users, no ACL at all with
   * allow.everyone.if.no.acl.found), or some ALLOW of it (or of ALL) that no DENY covers: a literal
   * `*` DENY covers everything, a literal DENY its own name, a prefixed DENY every name it prefixes.
   */
  allowedOnSomeResource(who: RequestIdentity, operation: number, resourceType: number): boolean {
    if (this.authorize(who, { operation, resourceType, resourceName: "hardcode" })) return true;
    const deniedLiteral = new Set<string>();
    const deniedPrefixes = new Set<string>();
    const allowedLiteral = new Set<string>();
    const allowedPrefixes = new Set<string>();
    let wildcardAllowed = false;
    for (const acl of this.byType.get(resourceType) ?? []) {
      if (acl.host !== who.host && acl.host !== WILDCARD) continue;
      if (acl.principal !== who.principal && acl.principal !== WILDCARD_PRINCIPAL) continue;
      if (acl.operation !== operation && acl.operation !== AclOperation.ALL) continue;
      const literal = acl.patternType === PatternType.LITERAL;
      if (acl.permissionType === AclPermissionType.DENY) {
        if (literal && acl.resourceName === WILDCARD) return false;
        (literal ? deniedLiteral : deniedPrefixes).add(acl.resourceName);
        continue;
      }
      if (acl.permissionType !== AclPermissionType.ALLOW) continue;
      if (literal && acl.resourceName === WILDCARD) wildcardAllowed = true;
      else (literal ? allowedLiteral : allowedPrefixes).add(acl.resourceName);
    }
    if (wildcardAllowed) return true;
    const coveredByPrefix = (name: string) => {
      for (let end = 1; end <= name.length; end++) if (deniedPrefixes.has(name.slice(0, end))) return true;
      return false;
    };
    for (const name of allowedLiteral) if (!deniedLiteral.has(name) && !coveredByPrefix(name)) return true;
    for (const name of allowedPrefixes) if (!coveredByPrefix(name)) return true;
    return false;
  }

  /** The operations of the resource's type that `who` may perform on it (authorized-operations fields). */
  authorizedOperations(who: RequestIdentity, resourceType: number, resourceName: string): number[] {
    return (SUPPORTED_OPERATIONS[resourceType] ?? []).filter((operation) => this.authorize(who, { operation, resourceType, resourceName }));
  }
}
