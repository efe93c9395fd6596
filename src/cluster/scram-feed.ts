/**
 * SCRAM credential changes across the brokers of a cluster: the credentials live in
 * `__cluster/scram-credentials.json`, every broker keeps them in memory to authenticate from, and a broker
 * that altered them (AlterUserScramCredentials) announces it under `/bunka/<clusterId>/scram-credentials`
 * so that every broker reads the file again (cluster/shared-file-feed.ts).
 */
import { type SharedFile, sharedFileChangeKey, SharedFileFeed, type SharedFileFeedOptions } from "./shared-file-feed.ts";

export const SCRAM_CREDENTIALS_FILE: SharedFile = { key: "scram-credentials", format: "bunka-scram-credentials-change", version: 1, what: "the SCRAM credentials" };
export const SCRAM_CHANGE_FORMAT = SCRAM_CREDENTIALS_FILE.format;

/** Put by a broker after it altered SCRAM credentials, so that every broker reads them again. */
export const scramCredentialsChangeKey = (clusterId: string): string => sharedFileChangeKey(clusterId, SCRAM_CREDENTIALS_FILE);

export type ScramFeedOptions = SharedFileFeedOptions;

export class ScramFeed extends SharedFileFeed {
  static open(options: ScramFeedOptions): Promise<ScramFeed> {
    return SharedFileFeed.started(new ScramFeed(SCRAM_CREDENTIALS_FILE, options));
  }

  /** Tells the other brokers that the credentials changed; call once the change is durable. */
  announceScramCredentials(): Promise<void> {
    return this.announce();
  }
}
