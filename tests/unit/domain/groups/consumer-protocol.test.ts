import { describe, expect, test } from "bun:test";
import { subscribedTopicsOf } from "../../../../src/domain/groups/consumer-protocol.ts";
import { subscription } from "./support.ts";

describe("consumer protocol subscription", () => {
  test("every version is read through its version-0 prefix", () => {
    for (let version = 0; version <= 3; version++) {
      expect(subscribedTopicsOf(subscription(["orders", "payments"], version))).toEqual(["orders", "payments"]);
    }
  });

  test("a future version with more fields still parses", () => {
    const bytes = subscription(["a"], 3);
    const future = new Uint8Array([...bytes, 1, 2, 3, 4]);
    future[1] = 9; // version 9
    expect(subscribedTopicsOf(future)).toEqual(["a"]);
  });

  test("what is not a subscription is null (unknown subscriptions)", () => {
    expect(subscribedTopicsOf(new Uint8Array())).toBeNull();
    expect(subscribedTopicsOf(new Uint8Array([0, 0, 0, 0, 0, 5]))).toBeNull(); // 5 topics, no bytes
    expect(subscribedTopicsOf(new Uint8Array([0xff, 0xff, 0, 0, 0, 0]))).toBeNull(); // negative version
    expect(subscribedTopicsOf(new Uint8Array([0, 0, 0xff, 0xff, 0xff, 0xff]))).toBeNull(); // negative count
  });

  test("kafkajs's subscription (version 0, user data) as captured against Apache", () => {
    const kafkajs = new Uint8Array([0, 0, 0, 0, 0, 1, 0, 14, ...new TextEncoder().encode("golden-kafkajs"), 0, 0, 0, 0]);
    expect(subscribedTopicsOf(kafkajs)).toEqual(["golden-kafkajs"]);
  });
});
