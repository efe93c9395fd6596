/**
 * ACL bindings and filters with Apache Kafka's names and wire codes (AclOperation, AclPermissionType,
 * ResourceType, PatternType, ResourcePatternFilter, AccessControlEntryFilter), and the validation that
 * Apache's CreateAcls / DescribeAcls / DeleteAcls apply to them (the requests' own checks, AclApis and
 * AclControlManager). Pure: no I/O. The decisions themselves are in acl-authorizer.ts.
 */

/** AclOperation codes. UNKNOWN and ANY appear only in filters (ANY) or as a client's mistake (UNKNOWN). */
export const AclOperation = {
  UNKNOWN: 0,
  ANY: 1,
  ALL: 2,
  READ: 3,
  WRITE: 4,
  CREATE: 5,
  DELETE: 6,
  ALTER: 7,
  DESCRIBE: 8,
  CLUSTER_ACTION: 9,
  DESCRIBE_CONFIGS: 10,
  ALTER_CONFIGS: 11,
  IDEMPOTENT_WRITE: 12,
  CREATE_TOKENS: 13,
  DESCRIBE_TOKENS: 14,
  TWO_PHASE_COMMIT: 15,
} as const;
export type AclOperationCode = (typeof AclOperation)[keyof typeof AclOperation];

export const AclPermissionType = { UNKNOWN: 0, ANY: 1, DENY: 2, ALLOW: 3 } as const;
export type AclPermissionCode = (typeof AclPermissionType)[keyof typeof AclPermissionType];

export const ResourceType = {
  UNKNOWN: 0,
  ANY: 1,
  TOPIC: 2,
  GROUP: 3,
  CLUSTER: 4,
  TRANSACTIONAL_ID: 5,
  DELEGATION_TOKEN: 6,
  USER: 7,
} as const;
export type ResourceTypeCode = (typeof ResourceType)[keyof typeof ResourceType];

export const PatternType = { UNKNOWN: 0, ANY: 1, MATCH: 2, LITERAL: 3, PREFIXED: 4 } as const;
export type PatternTypeCode = (typeof PatternType)[keyof typeof PatternType];

/** The one name of the CLUSTER resource (Apache's Resource.CLUSTER_NAME). */
export const CLUSTER_NAME = "kafka-cluster";
/** A literal resource name matching every name of its type, and the host matching every host. */
export const WILDCARD = "*";
/** The principal an ACL names to match every principal. */
export const WILDCARD_PRINCIPAL = "User:*";

const nameOf = (table: Record<string, number>, code: number): string =>
  Object.keys(table).find((key) => table[key] === code) ?? "UNKNOWN";

export const operationName = (code: number): string => nameOf(AclOperation, code);
export const permissionName = (code: number): string => nameOf(AclPermissionType, code);
export const resourceTypeName = (code: number): string => nameOf(ResourceType, code);
export const patternTypeName = (code: number): string => nameOf(PatternType, code);

/** A code read from the wire that Apache does not know reads as UNKNOWN (its fromCode does the same). */
const known = (table: Record<string, number>, code: number): number => (Object.values(table).includes(code) ? code : 0);
export const operationOf = (code: number): number => known(AclOperation, code);
export const permissionOf = (code: number): number => known(AclPermissionType, code);
export const resourceTypeOf = (code: number): number => known(ResourceType, code);
export const patternTypeOf = (code: number): number => known(PatternType, code);

/** One ACL: a resource pattern and an access control entry (Apache's AclBinding / StandardAcl). */
export interface AclBinding {
  resourceType: number;
  resourceName: string;
  patternType: number;
  /** "User:name", or "User:*" for everyone. */
  principal: string;
  /** A client's address, or "*" for every host. */
  host: string;
  operation: number;
  permissionType: number;
}

/** What DescribeAcls and DeleteAcls select by (Apache's AclBindingFilter); null fields match anything. */
export interface AclBindingFilter {
  resourceType: number;
  resourceName: string | null;
  patternType: number;
  principal: string | null;
  host: string | null;
  operation: number;
  permissionType: number;
}

export const sameBinding = (a: AclBinding, b: AclBinding): boolean =>
  a.resourceType === b.resourceType &&
  a.resourceName === b.resourceName &&
  a.patternType === b.patternType &&
  a.principal === b.principal &&
  a.host === b.host &&
  a.operation === b.operation &&
  a.permissionType === b.permissionType;

/** Whether a literal or prefixed pattern applies to the resource `name` (an authorization's view). */
export function patternMatchesName(binding: Pick<AclBinding, "resourceName" | "patternType">, name: string): boolean {
  if (binding.patternType === PatternType.LITERAL) return binding.resourceName === name || binding.resourceName === WILDCARD;
  if (binding.patternType === PatternType.PREFIXED) return name.startsWith(binding.resourceName);
  return false;
}

/** Apache's ResourcePatternFilter.matches followed by AccessControlEntryFilter.matches. */
export function filterMatches(filter: AclBindingFilter, acl: AclBinding): boolean {
  return resourceFilterMatches(filter, acl) && entryFilterMatches(filter, acl);
}

function resourceFilterMatches(filter: AclBindingFilter, acl: AclBinding): boolean {
  if (filter.resourceType !== ResourceType.ANY && filter.resourceType !== acl.resourceType) return false;
  const anyPattern = filter.patternType === PatternType.ANY;
  const matchPattern = filter.patternType === PatternType.MATCH;
  if (!anyPattern && !matchPattern && filter.patternType !== acl.patternType) return false;
  if (filter.resourceName === null) return true;
  // ANY, or the filter's own pattern type: the name as written.
  if (anyPattern || filter.patternType === acl.patternType) return filter.resourceName === acl.resourceName;
  // MATCH: every ACL that would apply to a resource of that name.
  return patternMatchesName(acl, filter.resourceName);
}

function entryFilterMatches(filter: AclBindingFilter, acl: AclBinding): boolean {
  if (filter.principal !== null && filter.principal !== acl.principal) return false;
  if (filter.host !== null && filter.host !== acl.host) return false;
  if (filter.operation !== AclOperation.ANY && filter.operation !== acl.operation) return false;
  return filter.permissionType === AclPermissionType.ANY || filter.permissionType === acl.permissionType;
}

/**
 * Why CreateAcls refuses a binding (INVALID_REQUEST, Apache's messages), or null. The order is
 * Apache's: AclApis' own checks (the CLUSTER resource's name, an empty name), then AclControlManager's
 * validateNewAcl (the enums, then the name, then a principal without the colon of "Type:name").
 */
export function newBindingProblem(acl: AclBinding): string | null {
  if (acl.resourceType === ResourceType.CLUSTER && acl.resourceName !== CLUSTER_NAME) {
    return `The only valid name for the CLUSTER resource is ${CLUSTER_NAME}`;
  }
  if (acl.resourceName === "") return "Invalid empty resource name";
  if (acl.resourceType === ResourceType.UNKNOWN || acl.resourceType === ResourceType.ANY) {
    return `Invalid resourceType ${resourceTypeName(acl.resourceType)}`;
  }
  if (acl.patternType !== PatternType.LITERAL && acl.patternType !== PatternType.PREFIXED) {
    return `Invalid patternType ${patternTypeName(acl.patternType)}`;
  }
  if (acl.operation === AclOperation.UNKNOWN || acl.operation === AclOperation.ANY) {
    return `Invalid operation ${operationName(acl.operation)}`;
  }
  if (acl.permissionType !== AclPermissionType.ALLOW && acl.permissionType !== AclPermissionType.DENY) {
    return `Invalid permissionType ${permissionName(acl.permissionType)}`;
  }
  return principalProblem(acl.principal);
}

/** Why a principal cannot name a principal type (Apache 4.1's AclControlManager, its words), or null. */
export function principalProblem(principal: string): string | null {
  if (!principal.includes(":")) {
    return `Could not parse principal from \`${principal}\` (no colon is present separating the principal type from the principal name)`;
  }
  return null;
}

/**
 * Why a request's creation or filter carries an UNKNOWN element, which Apache's request classes refuse
 * as a whole before the handler runs (IllegalArgumentException, answered INVALID_REQUEST).
 */
export function unknownElements(item: { resourceType: number; patternType: number; operation: number; permissionType: number }): boolean {
  return (
    resourceTypeOf(item.resourceType) === ResourceType.UNKNOWN ||
    patternTypeOf(item.patternType) === PatternType.UNKNOWN ||
    operationOf(item.operation) === AclOperation.UNKNOWN ||
    permissionOf(item.permissionType) === AclPermissionType.UNKNOWN
  );
}

/** The operations Apache reports per resource type in authorized-operations fields (AclEntry.supportedOperations). */
export const SUPPORTED_OPERATIONS: Readonly<Record<number, readonly number[]>> = {
  [ResourceType.TOPIC]: [
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
  ],
  [ResourceType.GROUP]: [AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS],
  [ResourceType.CLUSTER]: [
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
  ],
  [ResourceType.TRANSACTIONAL_ID]: [AclOperation.DESCRIBE, AclOperation.WRITE],
  [ResourceType.DELEGATION_TOKEN]: [AclOperation.DESCRIBE],
  [ResourceType.USER]: [AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS],
};

/** A 32-bit field with bit `op` set for each operation (Utils.to32BitField). */
export const operationsBitField = (ops: Iterable<number>): number => {
  let bits = 0;
  for (const op of ops) bits |= 1 << op;
  return bits;
};

/** The principal in the canonical "Type:name" form the ACLs use; super.users entries are compared as written. */
export function parseSuperUsers(value: string): string[] {
  return value
    .split(";")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
}
