/**
 * Apache's ConfigDef value rules as Java applies them: what parses for each type, how parsed values
 * print (DescribeConfigs), and how refusals quote the value.
 */
import { describe, expect, test } from "bun:test";
import {
  canonicalValue,
  doubleIn,
  integerIn,
  javaDoubleToString,
  listOf,
  parseJavaBoolean,
  parseJavaDouble,
  parseJavaInteger,
  parseJavaList,
  stringIn,
} from "../../../src/domain/config-values.ts";

describe("parsing", () => {
  test("integers: Java's parseLong / parseInt after a trim, within 64 / 32 bits", () => {
    expect(parseJavaInteger(" +5 ", "LONG")).toBe(5n);
    expect(parseJavaInteger("-9223372036854775808", "LONG")).toBe(-(2n ** 63n));
    expect(parseJavaInteger("9223372036854775808", "LONG")).toBeUndefined();
    expect(parseJavaInteger("2147483648", "INT")).toBeUndefined();
    for (const bad of ["", "1.0", "1e3", "0x10", "+-1", "1_000", " "]) expect(parseJavaInteger(bad, "LONG")).toBeUndefined();
  });

  test("doubles: every form of Java's Double.parseDouble", () => {
    const cases: [string, number][] = [
      ["0.5", 0.5],
      [" .5 ", 0.5],
      ["1.", 1],
      ["5e-1", 0.5],
      ["5E-1", 0.5],
      ["0.5f", 0.5],
      ["2D", 2],
      ["-0", -0],
      ["+1", 1],
      ["0x1p-1", 0.5],
      ["0X.8P0", 0.5],
      ["0x1.8p1", 3],
      ["Infinity", Infinity],
      ["-Infinity", -Infinity],
    ];
    for (const [text, value] of cases) expect([text, parseJavaDouble(text)]).toEqual([text, value]);
    expect(parseJavaDouble("NaN")).toBeNaN();
    for (const bad of ["", "abc", "1e", "e5", ".", "0x1", "0xp1", "NaNf", "1,5", "inf"]) expect([bad, parseJavaDouble(bad)]).toEqual([bad, undefined]);
  });

  test("booleans: true or false in any case, after a trim", () => {
    expect([parseJavaBoolean(" TRUE "), parseJavaBoolean("False"), parseJavaBoolean("yes"), parseJavaBoolean("1")]).toEqual([true, false, undefined, undefined]);
  });

  test("lists: split at commas with their whitespace, trailing empty items kept, empty is []", () => {
    expect(parseJavaList(" a , b ")).toEqual(["a", "b"]);
    expect(parseJavaList("a,")).toEqual(["a", ""]);
    expect(parseJavaList(",")).toEqual(["", ""]);
    expect(parseJavaList("  ")).toEqual([]);
  });
});

describe("printing", () => {
  test("Java's Double.toString", () => {
    const cases: [number, string][] = [
      [0.5, "0.5"],
      [1, "1.0"],
      [0, "0.0"],
      [-0, "-0.0"],
      [0.001, "0.001"],
      [0.0001, "1.0E-4"],
      [1e-10, "1.0E-10"],
      [1234567, "1234567.0"],
      [12345678, "1.2345678E7"],
      [1.7976931348623157e308, "1.7976931348623157E308"],
      [0.123456789, "0.123456789"],
      [-2.5e-5, "-2.5E-5"],
      [Infinity, "Infinity"],
      [NaN, "NaN"],
    ];
    for (const [value, text] of cases) expect([value, javaDoubleToString(value)]).toEqual([value, text]);
  });

  test("canonical values: parsed, then printed as Apache prints them", () => {
    expect(canonicalValue("DOUBLE", "1")).toBe("1.0");
    expect(canonicalValue("LONG", " +7 ")).toBe("7");
    expect(canonicalValue("BOOLEAN", "TRUE")).toBe("true");
    expect(canonicalValue("STRING", " gzip ")).toBe("gzip");
    expect(canonicalValue("LIST", "compact , delete")).toBe("compact,delete");
    expect(canonicalValue("LIST", "")).toBe("");
  });
});

describe("checks and their wording", () => {
  test("a value that does not parse is quoted as sent; one out of bounds as Java prints it", () => {
    const long = integerIn("LONG", -1n);
    expect(long(" x ", "n")).toBe("Invalid value  x  for configuration n: Not a number of type LONG");
    expect(long(" -5 ", "n")).toBe("Invalid value -5 for configuration n: Value must be at least -1");
    const bounded = integerIn("INT", 1n, 17n);
    expect(bounded("18", "n")).toBe("Invalid value 18 for configuration n: Value must be no more than 17");
    const ratio = doubleIn(0, 1);
    expect(ratio("2", "n")).toBe("Invalid value 2.0 for configuration n: Value must be no more than 1");
    expect(ratio("NaN", "n")).toBeNull();
    expect(doubleIn()("-5", "n")).toBeNull();
    expect(stringIn(["a", "b"])(" c ", "n")).toBe("Invalid value c for configuration n: String must be one of: a, b");
    expect(listOf(["a", "b"])("a, c", "n")).toBe("Invalid value c for configuration n: String must be one of: a, b");
  });
});
