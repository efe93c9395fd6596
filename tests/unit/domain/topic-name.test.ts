import { describe, expect, test } from "bun:test";
import {
  isValidTopicName,
  TOPIC_NAME_LENGTH_MAX,
  topicCollisionKey,
  topicCollisionReason,
  topicNameInvalidReason,
} from "../../../src/domain/topic-name.ts";

describe("topicNameInvalidReason", () => {
  test("accepts ASCII alphanumerics, '.', '_' and '-'", () => {
    for (const name of ["orders", "a", "A-b_c.d", "0", "__consumer_offsets", "x".repeat(TOPIC_NAME_LENGTH_MAX), "..."]) {
      expect(topicNameInvalidReason(name)).toBeNull();
      expect(isValidTopicName(name)).toBe(true);
    }
  });

  test("refuses the empty name", () => {
    expect(topicNameInvalidReason("")).toBe("Topic name is illegal, it can't be empty");
  });

  test('refuses "." and "..", which would name directories on disk', () => {
    expect(topicNameInvalidReason(".")).toBe('Topic name cannot be "." or ".."');
    expect(topicNameInvalidReason("..")).toBe('Topic name cannot be "." or ".."');
  });

  test("refuses names longer than 249 characters", () => {
    expect(TOPIC_NAME_LENGTH_MAX).toBe(249);
    expect(topicNameInvalidReason("x".repeat(250))).toContain("can't be longer than 249 characters");
  });

  test("refuses any other character, including path separators and non-ASCII", () => {
    for (const name of ["a/b", "a\\b", "a b", "tópico", "a:b", "a\u0000b", "../etc"]) {
      expect(topicNameInvalidReason(name)).toContain("contains a character other than ASCII alphanumerics");
      expect(isValidTopicName(name)).toBe(false);
    }
  });
});

describe("topic name collisions", () => {
  test("'.' and '_' collide, as in Apache Kafka's metric names", () => {
    expect(topicCollisionKey("a.b_c")).toBe("a_b_c");
    expect(topicCollisionReason("a.b", ["x", "a_b"])).toBe("Topic 'a.b' collides with existing topic: a_b");
    expect(topicCollisionReason("a.b", ["a.b", "a-b"])).toBeNull();
  });
});
