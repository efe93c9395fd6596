/**
 * The parts of the consumer embedded protocol (protocol type "consumer") the coordinator needs: the
 * topics a member subscribes to, read from its JoinGroup metadata.
 *
 * The subscription is `int16 version` followed by a struct whose version 0 layout (`[]string topics`,
 * `bytes userData`) is a prefix of every later version (ConsumerProtocolSubscription.json says new versions
 * may only append fields). Like Apache's ClassicGroup.computeSubscribedTopics, we read the version and then
 * the version-0 prefix whatever the version says, and ignore what follows, so a future version still parses.
 */
import { DecodeError } from "../../errors/errors.ts";
import { Reader } from "../../protocol/reader.ts";

export const CONSUMER_PROTOCOL_TYPE = "consumer";

/**
 * The topics of a consumer subscription, or null when the bytes are not a consumer subscription (Apache
 * then treats the group as subscribed to every topic: it cannot tell).
 */
export function subscribedTopicsOf(metadata: Uint8Array): string[] | null {
  try {
    const r = new Reader(metadata);
    const version = r.int16();
    if (version < 0) return null;
    const count = r.arrayLength();
    if (count < 0) return null;
    const topics: string[] = [];
    for (let i = 0; i < count; i++) topics.push(r.string());
    return topics;
  } catch (error) {
    if (error instanceof DecodeError) return null;
    throw error;
  }
}
