/**
 * ACL changes across the brokers of a cluster: the ACLs live in `__cluster/acls.json`, every broker with
 * an authorizer keeps them in memory, and a broker that changed them (CreateAcls, DeleteAcls) announces it
 * under `/bunka/<clusterId>/acls` so that every broker reads the file again (cluster/shared-file-feed.ts).
 */
import { type SharedFile, sharedFileChangeKey, SharedFileFeed, type SharedFileFeedOptions } from "./shared-file-feed.ts";

export const ACLS_FILE: SharedFile = { key: "acls", format: "bunka-acls-change", version: 1, what: "the ACLs" };
export const ACLS_CHANGE_FORMAT = ACLS_FILE.format;

/** Put by a broker after it changed the ACLs, so that every broker reads them again. */
export const aclsChangeKey = (clusterId: string): string => sharedFileChangeKey(clusterId, ACLS_FILE);

export type AclFeedOptions = SharedFileFeedOptions;

export class AclFeed extends SharedFileFeed {
  static open(options: AclFeedOptions): Promise<AclFeed> {
    return SharedFileFeed.started(new AclFeed(ACLS_FILE, options));
  }

  /** Tells the other brokers that the ACLs changed; call once the change is durable. */
  announceAcls(): Promise<void> {
    return this.announce();
  }
}
