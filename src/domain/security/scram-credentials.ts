/**
 * The rules of AlterUserScramCredentials (51) and DescribeUserScramCredentials (50), as Apache Kafka 4.1's
 * controller (ScramControlManager) and metadata image (ScramImage) answer them, with their codes and
 * messages. Pure: the credentials are a map handed in, and the alteration comes back as a plan that the
 * store (storage/scram-credential-store.ts) makes durable.
 *
 * Alter, per user (one answer per user, the errors after the successes as Apache lists them):
 * - a user named twice in one request (deletion or upsertion): DUPLICATE_RESOURCE "A user credential
 *   cannot be altered twice in the same request", and none of that user's changes is made;
 * - an empty name: UNACCEPTABLE_CREDENTIAL "Username must not be empty"; a mechanism type other than 1
 *   (SCRAM-SHA-256) or 2 (SCRAM-SHA-512): UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism";
 * - iterations below 4096: UNACCEPTABLE_CREDENTIAL "Too few iterations"; above 16384 "Too many iterations";
 * - deleting a credential that does not exist: RESOURCE_NOT_FOUND "Attempt to delete a user credential
 *   that does not exist".
 * The salted password is turned into the stored key and server key here; the password never reaches the
 * broker (the client salts it), and neither the salted password nor anything derived from it but those
 * two keys is kept.
 *
 * Describe: null or no users lists every user with a credential; a user named twice is DUPLICATE_RESOURCE
 * "Cannot describe SCRAM credentials for the same user twice in a single request: <user>"; a user without
 * credentials RESOURCE_NOT_FOUND "Attempt to describe a user credential that does not exist: <user>".
 */
import { ErrorCode } from "../../errors/generated/error-codes.ts";
import { credentialOf, SCRAM_MECHANISMS, scramMechanismOfType, type ScramCredential, type ScramMechanismName } from "./scram.ts";

/** user -> mechanism -> credential. */
export type ScramCredentialMap = ReadonlyMap<string, ReadonlyMap<ScramMechanismName, ScramCredential>>;

export interface CredentialDeletion {
  name: string;
  mechanism: number;
}

export interface CredentialUpsertion {
  name: string;
  mechanism: number;
  iterations: number;
  salt: Uint8Array;
  saltedPassword: Uint8Array;
}

export interface UserOutcome {
  user: string;
  errorCode: number;
  errorMessage: string | null;
}

export interface AlterationPlan {
  /** One per user named, in Apache's order: deletions, upsertions, then the refusals. */
  results: UserOutcome[];
  /** What to change, for the users whose changes are all accepted. */
  deletions: { user: string; mechanism: ScramMechanismName }[];
  upsertions: { user: string; mechanism: ScramMechanismName; credential: ScramCredential }[];
}

const DUPLICATE = "A user credential cannot be altered twice in the same request";

function nameAndMechanismProblem(name: string, mechanism: number): UserOutcome | undefined {
  if (name === "") return { user: name, errorCode: ErrorCode.UNACCEPTABLE_CREDENTIAL, errorMessage: "Username must not be empty" };
  if (scramMechanismOfType(mechanism) === undefined) return { user: name, errorCode: ErrorCode.UNSUPPORTED_SASL_MECHANISM, errorMessage: "Unknown SCRAM mechanism" };
  return undefined;
}

export function planAlteration(current: ScramCredentialMap, deletions: readonly CredentialDeletion[], upsertions: readonly CredentialUpsertion[]): AlterationPlan {
  const errors = new Map<string, UserOutcome>();
  const deleting = new Map<string, CredentialDeletion>();
  const upserting = new Map<string, CredentialUpsertion>();
  const refuse = (user: string, errorCode: number, errorMessage: string) => errors.set(user, { user, errorCode, errorMessage });

  for (const deletion of deletions) {
    if (errors.has(deletion.name)) continue;
    if (deleting.delete(deletion.name)) {
      refuse(deletion.name, ErrorCode.DUPLICATE_RESOURCE, DUPLICATE);
      continue;
    }
    const problem = nameAndMechanismProblem(deletion.name, deletion.mechanism);
    if (problem !== undefined) {
      errors.set(deletion.name, problem);
      continue;
    }
    const mechanism = scramMechanismOfType(deletion.mechanism)!.name as ScramMechanismName;
    if (current.get(deletion.name)?.get(mechanism) === undefined) {
      refuse(deletion.name, ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist");
      continue;
    }
    deleting.set(deletion.name, deletion);
  }
  for (const upsertion of upsertions) {
    if (errors.has(upsertion.name)) continue;
    if (deleting.delete(upsertion.name) || upserting.delete(upsertion.name)) {
      refuse(upsertion.name, ErrorCode.DUPLICATE_RESOURCE, DUPLICATE);
      continue;
    }
    const problem = nameAndMechanismProblem(upsertion.name, upsertion.mechanism);
    if (problem !== undefined) {
      errors.set(upsertion.name, problem);
      continue;
    }
    const info = scramMechanismOfType(upsertion.mechanism)!;
    if (upsertion.iterations < info.minIterations) {
      refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations");
      continue;
    }
    if (upsertion.iterations > info.maxIterations) {
      refuse(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations");
      continue;
    }
    upserting.set(upsertion.name, upsertion);
  }

  const plan: AlterationPlan = { results: [], deletions: [], upsertions: [] };
  for (const deletion of deleting.values()) {
    plan.results.push({ user: deletion.name, errorCode: ErrorCode.NONE, errorMessage: null });
    plan.deletions.push({ user: deletion.name, mechanism: scramMechanismOfType(deletion.mechanism)!.name as ScramMechanismName });
  }
  for (const upsertion of upserting.values()) {
    const info = scramMechanismOfType(upsertion.mechanism)!;
    plan.results.push({ user: upsertion.name, errorCode: ErrorCode.NONE, errorMessage: null });
    plan.upsertions.push({
      user: upsertion.name,
      mechanism: info.name as ScramMechanismName,
      credential: credentialOf(info, upsertion.salt, upsertion.saltedPassword, upsertion.iterations),
    });
  }
  plan.results.push(...errors.values());
  return plan;
}

/** The credentials after a plan is applied (a new map; `current` is not changed). */
export function applyPlan(current: ScramCredentialMap, plan: Pick<AlterationPlan, "deletions" | "upsertions">): Map<string, Map<ScramMechanismName, ScramCredential>> {
  const next = new Map([...current].map(([user, byMechanism]) => [user, new Map(byMechanism)]));
  for (const { user, mechanism } of plan.deletions) {
    next.get(user)?.delete(mechanism);
    if (next.get(user)?.size === 0) next.delete(user);
  }
  for (const { user, mechanism, credential } of plan.upsertions) {
    let byMechanism = next.get(user);
    if (byMechanism === undefined) next.set(user, (byMechanism = new Map()));
    byMechanism.set(mechanism, credential);
  }
  return next;
}

export interface UserDescription {
  user: string;
  errorCode: number;
  errorMessage: string | null;
  credentialInfos: { mechanism: number; iterations: number }[];
}

export function describeCredentials(current: ScramCredentialMap, users: readonly string[] | null): UserDescription[] {
  const named = new Map<string, boolean>(); // user -> named more than once
  if (users === null || users.length === 0) {
    for (const user of [...current.keys()].sort()) named.set(user, false);
  } else {
    for (const user of users) named.set(user, named.has(user));
  }
  const out: UserDescription[] = [];
  for (const [user, duplicate] of named) {
    if (duplicate) {
      out.push({ user, errorCode: ErrorCode.DUPLICATE_RESOURCE, errorMessage: `Cannot describe SCRAM credentials for the same user twice in a single request: ${user}`, credentialInfos: [] });
      continue;
    }
    const byMechanism = current.get(user);
    const infos = SCRAM_MECHANISMS.flatMap((m) => {
      const credential = byMechanism?.get(m.name as ScramMechanismName);
      return credential === undefined ? [] : [{ mechanism: m.type, iterations: credential.iterations }];
    });
    if (infos.length === 0) {
      out.push({ user, errorCode: ErrorCode.RESOURCE_NOT_FOUND, errorMessage: `Attempt to describe a user credential that does not exist: ${user}`, credentialInfos: [] });
    } else {
      // "" rather than null, as Apache's response data default sends it.
      out.push({ user, errorCode: ErrorCode.NONE, errorMessage: "", credentialInfos: infos });
    }
  }
  return out;
}
