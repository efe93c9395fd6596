/**
 * Topic name rules, as Apache Kafka enforces them (org.apache.kafka.common.internals.Topic). Pure
 * functions returning a reason (for the INVALID_TOPIC_EXCEPTION error message) or null when valid.
 *
 * The rules matter beyond the wire: a topic name becomes a file name (`__cluster/topics/<topic>.json`)
 * and part of a directory name (`<topic>-<partition>`), so "." / ".." and path separators must never
 * get through.
 */

/** Apache's limit: 255 (a file name) minus room for "-<partition>" and the ".<uuid>-delete" suffix. */
export const TOPIC_NAME_LENGTH_MAX = 249;

const LEGAL = /^[a-zA-Z0-9._-]+$/;

/** Why `name` is not a legal topic name, or null when it is. Messages follow Apache's wording. */
export function topicNameInvalidReason(name: string): string | null {
  if (name.length === 0) return "Topic name is illegal, it can't be empty";
  if (name === "." || name === "..") return 'Topic name cannot be "." or ".."';
  if (name.length > TOPIC_NAME_LENGTH_MAX) {
    return `Topic name is illegal, it can't be longer than ${TOPIC_NAME_LENGTH_MAX} characters, topic name: ${name}`;
  }
  if (!LEGAL.test(name)) {
    return `Topic name "${name}" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'`;
  }
  return null;
}

export function isValidTopicName(name: string): boolean {
  return topicNameInvalidReason(name) === null;
}

/**
 * '.' and '_' map to the same metric name, so Apache refuses a topic whose name differs from an
 * existing one only by those characters. Returns the key under which such names collide.
 */
export function topicCollisionKey(name: string): string {
  return name.replaceAll(".", "_");
}

/**
 * Why `name` cannot be created next to `existing` (Apache's collision rule), or null. An identical
 * name is not a collision: that is TOPIC_ALREADY_EXISTS, which the caller checks first.
 */
export function topicCollisionReason(name: string, existing: Iterable<string>): string | null {
  const key = topicCollisionKey(name);
  for (const other of existing) {
    if (other !== name && topicCollisionKey(other) === key) {
      return `Topic '${name}' collides with existing topic: ${other}`;
    }
  }
  return null;
}
