/**
 * SCRAM credentials as the broker serves them (docs/architecture.md, "SASL"): SaslAuthenticate reads
 * them from the store in memory; AlterUserScramCredentials changes them under the metadata gate
 * (metadata-mutations.ts), which in cluster mode is the cluster-wide lock: holding it, the broker reads the
 * file again (another broker may have changed it), plans the change with Apache's rules
 * (domain/security/scram-credentials.ts), makes it durable, and announces it (cluster/scram-feed.ts)
 * before the gate is let go, so every broker reads the new file. Single-broker mode announces nothing.
 */
import type { Logger } from "../platform/logger.ts";
import {
  describeCredentials,
  planAlteration,
  type CredentialDeletion,
  type CredentialUpsertion,
  type UserDescription,
  type UserOutcome,
} from "../domain/security/scram-credentials.ts";
import type { ScramCredentialStore } from "../storage/scram-credential-store.ts";
import { ErrorCode } from "../errors/generated/error-codes.ts";
import { underGate } from "./metadata-mutations.ts";
import type { BrokerServices } from "./services.ts";

/** Where an alteration is announced (ScramFeed in cluster mode). */
export interface ScramAnnouncer {
  announceScramCredentials(): Promise<void>;
}

export class ScramCredentialService {
  private announcer: ScramAnnouncer | undefined;

  constructor(
    readonly store: ScramCredentialStore,
    private readonly log: Logger,
  ) {}

  /** Cluster mode wires its feed here; undefined stops announcing. */
  useAnnouncer(announcer: ScramAnnouncer | undefined): void {
    this.announcer = announcer;
  }

  describe(users: readonly string[] | null): UserDescription[] {
    return describeCredentials(this.store.all(), users);
  }

  alter(services: Pick<BrokerServices, "mutations" | "log">, deletions: readonly CredentialDeletion[], upsertions: readonly CredentialUpsertion[]): Promise<UserOutcome[]> {
    const users = [...new Set([...deletions.map((d) => d.name), ...upsertions.map((u) => u.name)])];
    return underGate(
      services,
      "AlterUserScramCredentials",
      async () => {
        if (services.mutations !== undefined) await this.store.refresh();
        const plan = planAlteration(this.store.all(), deletions, upsertions);
        if (plan.deletions.length > 0 || plan.upsertions.length > 0) {
          await this.store.apply(plan);
          this.log.info("altered SCRAM credentials", {
            deleted: plan.deletions.map((d) => `${d.user}/${d.mechanism}`),
            upserted: plan.upsertions.map((u) => `${u.user}/${u.mechanism}/${u.credential.iterations}`),
          });
          await this.announcer?.announceScramCredentials().catch((error: unknown) =>
            this.log.error("a SCRAM credential change could not be announced; other brokers read it at their next change", { error: String(error) }),
          );
        }
        return plan.results;
      },
      (reason) => users.map((user) => ({ user, errorCode: ErrorCode.REQUEST_TIMED_OUT, errorMessage: reason })),
    );
  }
}
