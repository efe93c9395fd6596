/**
 * The snappy decoder of the test record decoder (tests/support/record-decoder.ts), which the exactly-once
 * copier test relies on to read franz-go's output (franz-go compresses with snappy by default). Vectors made
 * with github.com/klauspost/compress/snappy (Encode, the raw block format).
 */
import { describe, expect, test } from "bun:test";
import { snappyDecompress } from "../../support/record-decoder.ts";

const fromHex = (hex: string) => Uint8Array.from(hex.match(/../g)!.map((b) => parseInt(b, 16)));
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/** "exactly once, " 20 times, then "the end": a literal, then 2-byte-offset copies of it. */
const REPEATED_BLOCK = fromHex("9f023465786163746c79206f6e63652c20ee0e00ee0e00ee0e00ee0e00660e001874686520656e64");
const REPEATED_TEXT = "exactly once, ".repeat(20) + "the end";

describe("snappy as Kafka clients write it", () => {
  test("a raw block (franz-go, librdkafka): literals and back-references", () => {
    expect(text(snappyDecompress(REPEATED_BLOCK))).toBe(REPEATED_TEXT);
    expect(text(snappyDecompress(fromHex("0308616263")))).toBe("abc");
  });

  test("a 1-byte-offset copy repeats what it overlaps (offset 1, length 7: a run)", () => {
    // Length 8; literal "a"; copy1 with length 7, offset 1: tag (7-4)<<2 | 1 = 0x0d, offset byte 1.
    expect(text(snappyDecompress(fromHex("0800610d01")))).toBe("aaaaaaaa");
  });

  test("the xerial framing of snappy-java (the Java client): a 16-byte header, then length-prefixed blocks", () => {
    const header = fromHex("82534e41505059000000000100000001");
    const block = (b: Uint8Array) => [...fromHex(b.length.toString(16).padStart(8, "0")), ...b];
    const framed = Uint8Array.from([...header, ...block(REPEATED_BLOCK), ...block(fromHex("0308616263"))]);
    expect(text(snappyDecompress(framed))).toBe(`${REPEATED_TEXT}abc`);
  });

  test("a back-reference before the start, or a block shorter than its header says, is an error", () => {
    expect(() => snappyDecompress(fromHex("080d02"))).toThrow("bad snappy back-reference");
    expect(() => snappyDecompress(fromHex("0508616263"))).toThrow("decoded to 3 bytes, its header says 5");
  });
});
