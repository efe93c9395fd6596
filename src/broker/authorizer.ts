/**
 * The authorizer handlers ask (docs/architecture.md, "Security"): Apache Kafka's StandardAuthorizer
 * rules (domain/security/acl-authorizer.ts) over the durable ACLs (storage/acl-store.ts).
 *
 * Off unless `authorizer.class.name` names StandardAuthorizer, as in Apache: then every check allows,
 * authorized-operations fields list every supported operation, and CreateAcls / DescribeAcls /
 * DeleteAcls answer SECURITY_DISABLED. On, each handler asks what Apache's KafkaApis asks for its API,
 * with the connection's principal (ANONYMOUS until SASL or TLS names one) and its client's address.
 *
 * ACL changes go through the metadata gate (metadata-mutations.ts) like topic and config changes: in
 * cluster mode one change at a time across the brokers, the file read again first, and announced before
 * the gate is let go (cluster/acl-feed.ts), so that every broker reads the file again at once.
 */
import { ANONYMOUS_PRINCIPAL } from "../domain/security/connection-security.ts";
import { AclAuthorizerData, type RequestIdentity } from "../domain/security/acl-authorizer.ts";
import {
  type AclBinding,
  type AclBindingFilter,
  CLUSTER_NAME,
  filterMatches,
  operationName,
  operationsBitField,
  resourceTypeName,
  ResourceType,
  SUPPORTED_OPERATIONS,
} from "../domain/security/acl.ts";
import { LogRateLimit } from "../platform/log-rate-limit.ts";
import { apiCodecsByKey } from "../protocol/generated/index.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import type { Fs } from "../platform/fs.ts";
import type { Logger } from "../platform/logger.ts";
import { AclStore } from "../storage/acl-store.ts";
import type { BrokerConfig } from "./config.ts";
import type { RequestContext } from "./handler.ts";

/** ConfigResource type ids (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs). */
const CONFIG_RESOURCE_TOPIC = 2;
const CONFIG_RESOURCE_BROKER = 4;
const CONFIG_RESOURCE_BROKER_LOGGER = 8;
const CONFIG_RESOURCE_CLIENT_METRICS = 16;
const CONFIG_RESOURCE_GROUP = 32;

/** Apache's messages of the authorization errors (Errors.message()). */
const AUTHORIZATION_FAILED_MESSAGES: Readonly<Record<number, string>> = {
  [ErrorCode.TOPIC_AUTHORIZATION_FAILED]: "Topic authorization failed.",
  [ErrorCode.GROUP_AUTHORIZATION_FAILED]: "Group authorization failed.",
  [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]: "Cluster authorization failed.",
};

/** Where an ACL change is announced to the other brokers (cluster/acl-feed.ts); absent: single-broker mode. */
export interface AclAnnouncer {
  announceAcls(): Promise<void>;
}

/**
 * A check whose refusal is not logged: the request did not name the resource itself (a filter of what
 * to show, as Apache's logIfDenied = false: all topics in Metadata, ListGroups, ...).
 */
export interface CheckOptions {
  quiet?: boolean;
}

/** Denials logged per window (Apache logs each to kafka.authorizer.logger at INFO; bunka bounds them). */
const DENIAL_LINES_MAX = 20;
const DENIAL_WINDOW_MS = 10_000;

/** Names a check allowed: `has` is all a handler asks of it. */
export interface NameSet {
  has(name: string): boolean;
}

/** Without an authorizer every name is allowed, and nothing is allocated per request. */
const EVERY_NAME: NameSet = { has: () => true };

/** The principal and client address a request is checked with. */
export function identityOf(ctx: RequestContext): RequestIdentity {
  return { principal: ctx.connection.security?.principal ?? ANONYMOUS_PRINCIPAL, host: hostAddress(ctx.connection.remoteAddress) };
}

/** The client's address as Apache's InetAddress.getHostAddress gives it: an IPv4 client without the IPv6 mapping. */
function hostAddress(remoteAddress: string): string {
  return remoteAddress.startsWith("::ffff:") && remoteAddress.includes(".") ? remoteAddress.slice("::ffff:".length) : remoteAddress;
}

export class BrokerAuthorizer {
  private data: AclAuthorizerData;
  private announcer: AclAnnouncer | undefined;
  private readonly denialLines: LogRateLimit;

  private constructor(
    /** Undefined when no authorizer is configured: nothing is checked, and no ACL file is read. */
    private readonly store: AclStore | undefined,
    private readonly config: Pick<BrokerConfig, "superUsers" | "allowEveryoneIfNoAclFound">,
    private readonly log: Logger,
    monotonicMs: () => number,
  ) {
    this.data = this.snapshot();
    this.denialLines = new LogRateLimit(DENIAL_LINES_MAX, DENIAL_WINDOW_MS, monotonicMs);
  }

  /**
   * Opens the ACL store when an authorizer is configured (a damaged file is a CorruptStateError).
   * `monotonicMs` paces the log lines of denials.
   */
  static async open(fs: Fs, config: BrokerConfig, log: Logger, monotonicMs: () => number = () => performance.now()): Promise<BrokerAuthorizer> {
    const store = config.authorizerClassName === undefined ? undefined : await AclStore.open(fs, config.dataDir);
    if (store !== undefined) log.info("authorizer on", { class: config.authorizerClassName, acls: store.list().length, superUsers: config.superUsers });
    return new BrokerAuthorizer(store, config, log, monotonicMs);
  }

  /** A broker without an authorizer (tests building services by hand). */
  static disabled(log: Logger): BrokerAuthorizer {
    return new BrokerAuthorizer(undefined, { superUsers: [], allowEveryoneIfNoAclFound: false }, log, () => 0);
  }

  get enabled(): boolean {
    return this.store !== undefined;
  }

  /** How many ACLs are held (0 without an authorizer). */
  get aclCount(): number {
    return this.store?.list().length ?? 0;
  }

  /** Cluster mode: ACL changes made here are announced through `announcer` from now on. */
  useAnnouncer(announcer: AclAnnouncer | undefined): void {
    this.announcer = announcer;
  }

  /**
   * Whether the request's principal may perform `operation` on the named resource. A refusal is logged
   * (rate-limited, as Apache's authorizer logs it) unless `quiet`.
   */
  allows(ctx: RequestContext, operation: number, resourceType: number, resourceName: string, options: CheckOptions = {}): boolean {
    if (this.store === undefined) return true;
    const who = identityOf(ctx);
    if (this.data.authorize(who, { operation, resourceType, resourceName })) return true;
    if (options.quiet !== true) this.logDenial(ctx, who, operation, resourceType, resourceName);
    return false;
  }

  /** The names among `names` the principal may perform `operation` on (Apache's filterByAuthorized). */
  allowedNames(ctx: RequestContext, operation: number, resourceType: number, names: Iterable<string>, options: CheckOptions = {}): NameSet {
    if (this.store === undefined) return EVERY_NAME;
    const allowed = new Set<string>();
    for (const name of names) if (!allowed.has(name) && this.allows(ctx, operation, resourceType, name, options)) allowed.add(name);
    return allowed;
  }

  /** Whether the principal may perform `operation` on some resource of the type (authorizeByResourceType). */
  allowsSomeResource(ctx: RequestContext, operation: number, resourceType: number): boolean {
    if (this.store === undefined) return true;
    return this.data.allowedOnSomeResource(identityOf(ctx), operation, resourceType);
  }

  /** The authorized-operations bitfield of a resource (every supported operation without an authorizer). */
  authorizedOperations(ctx: RequestContext, resourceType: number, resourceName: string): number {
    if (this.store === undefined) return operationsBitField(SUPPORTED_OPERATIONS[resourceType] ?? []);
    return operationsBitField(this.data.authorizedOperations(identityOf(ctx), resourceType, resourceName));
  }

  /**
   * The error a config resource answers when the principal may not perform `operation` (DESCRIBE_CONFIGS
   * or ALTER_CONFIGS) on it, or NONE: a topic's own ACLs (TOPIC_AUTHORIZATION_FAILED), a group's
   * (GROUP_AUTHORIZATION_FAILED), the cluster's for broker, broker-logger and client-metrics resources
   * (CLUSTER_AUTHORIZATION_FAILED), as Apache's KafkaApis and ConfigHelper. Any other type is the
   * handler's to refuse.
   */
  configResourceError(ctx: RequestContext, operation: number, configResourceType: number, resourceName: string): number {
    switch (configResourceType) {
      case CONFIG_RESOURCE_TOPIC:
        return this.allows(ctx, operation, ResourceType.TOPIC, resourceName) ? ErrorCode.NONE : ErrorCode.TOPIC_AUTHORIZATION_FAILED;
      case CONFIG_RESOURCE_GROUP:
        return this.allows(ctx, operation, ResourceType.GROUP, resourceName) ? ErrorCode.NONE : ErrorCode.GROUP_AUTHORIZATION_FAILED;
      case CONFIG_RESOURCE_BROKER:
      case CONFIG_RESOURCE_BROKER_LOGGER:
      case CONFIG_RESOURCE_CLIENT_METRICS:
        return this.allows(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME) ? ErrorCode.NONE : ErrorCode.CLUSTER_AUTHORIZATION_FAILED;
      default:
        return ErrorCode.NONE;
    }
  }

  /** The message Apache gives a config resource's refusal: the error's own ("Topic authorization failed."). */
  static configRefusalMessage(errorCode: number): string | null {
    return AUTHORIZATION_FAILED_MESSAGES[errorCode] ?? null;
  }

  /** The ACLs a filter matches (DescribeAcls). */
  acls(filter: AclBindingFilter): AclBinding[] {
    return (this.store?.list() ?? []).filter((acl) => filterMatches(filter, acl));
  }

  /**
   * Adds the bindings durably (the caller has validated them and runs this under the metadata gate),
   * reading the file again first so that a change another broker made is kept, and announces it.
   */
  async create(bindings: readonly AclBinding[]): Promise<void> {
    const store = this.required();
    await this.reload();
    await store.create(bindings);
    this.data = this.snapshot();
    this.log.info("created ACLs", { count: bindings.length });
    await this.announce();
  }

  /** Removes what each filter matches, durably (under the gate, as `create`); resolves with it per filter. */
  async delete(filters: readonly AclBindingFilter[]): Promise<AclBinding[][]> {
    const store = this.required();
    await this.reload();
    const removed = await store.delete(filters);
    this.data = this.snapshot();
    const count = new Set(removed.flat()).size;
    if (count > 0) {
      this.log.info("deleted ACLs", { count });
      await this.announce();
    }
    return removed;
  }

  /** Reads the ACL file again (another broker changed it); resolves whether anything changed. */
  async reload(): Promise<boolean> {
    if (this.store === undefined) return false;
    const changed = await this.store.refresh();
    if (changed) this.data = this.snapshot();
    return changed;
  }

  private logDenial(ctx: RequestContext, who: RequestIdentity, operation: number, resourceType: number, resourceName: string): void {
    const dropped = this.denialLines.admit();
    if (dropped === undefined) return;
    const apiKey = ctx.header?.requestApiKey;
    this.log.info("authorization denied", {
      principal: who.principal,
      host: who.host,
      operation: operationName(operation),
      resource: `${resourceTypeName(resourceType)}:${resourceName}`,
      request: apiKey === undefined ? "" : (apiCodecsByKey.get(apiKey)?.name ?? String(apiKey)),
      ...(dropped > 0 ? { linesDropped: dropped } : {}),
    });
  }

  private async announce(): Promise<void> {
    // The change is durable either way: a broker that misses the announcement reads the file at the
    // next change (under the gate) or the next announcement.
    await this.announcer?.announceAcls().catch((error: unknown) => this.log.error("an ACL change could not be announced; other brokers read it at their next change", { error: String(error) }));
  }

  private required(): AclStore {
    if (this.store === undefined) throw new Error("no authorizer is configured");
    return this.store;
  }

  private snapshot(): AclAuthorizerData {
    return new AclAuthorizerData(this.store?.list() ?? [], { superUsers: this.config.superUsers, allowEveryoneIfNoAclFound: this.config.allowEveryoneIfNoAclFound });
  }
}
