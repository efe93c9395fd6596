/**
 * Apache Kafka's ConfigDef value rules, for the topic configs (topic-config.ts) and the broker settings
 * (cleaner-config.ts): how a string value parses for each type, how a parsed value prints, and the
 * wording of every refusal. Pure.
 *
 * Why so exact: clients and tools show these messages to people who know Kafka's, and DescribeConfigs
 * shows values the way Apache prints them after parsing ("1" for a DOUBLE reads back as "1.0", "+5" for a
 * LONG as "5", " compact , delete " for a LIST as "compact,delete"). Apache's refusals name the value in
 * two ways, and so do these: a value that does not parse is quoted as sent (untrimmed), one that parses
 * but fails a bound is quoted as Apache prints the parsed value ("2" for a DOUBLE is "2.0").
 */

export type ConfigType = "LONG" | "INT" | "STRING" | "LIST" | "DOUBLE" | "BOOLEAN";

export const INT32_MIN = -(2n ** 31n);
export const INT32_MAX = 2n ** 31n - 1n;
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
/** Long.MAX_VALUE as Apache prints it: the default of several "no limit" configs. */
export const LONG_MAX_TEXT = INT64_MAX.toString();

/** Apache's ConfigException message: "Invalid value X for configuration Y: why". */
export function invalidValue(name: string, shown: string, why: string): string {
  return `Invalid value ${shown} for configuration ${name}: ${why}`;
}

/** Java's Long.parseLong / Integer.parseInt grammar (optional sign, ASCII digits), after Apache's trim. */
export function parseJavaInteger(value: string, type: "LONG" | "INT"): bigint | undefined {
  const trimmed = value.trim();
  if (!/^[+-]?[0-9]+$/.test(trimmed)) return undefined;
  const parsed = BigInt(trimmed);
  const [low, high] = type === "LONG" ? [INT64_MIN, INT64_MAX] : [INT32_MIN, INT32_MAX];
  return parsed < low || parsed > high ? undefined : parsed;
}

const DECIMAL_DOUBLE = /^[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)$/;
const HEX_DOUBLE = /^([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?[pP]([+-]?[0-9]+)[fFdD]?$/;

/**
 * Java's Double.parseDouble, after Apache's trim: decimal and hexadecimal forms, an optional type suffix
 * (f, d), NaN and Infinity. Undefined when Java would throw NumberFormatException.
 */
export function parseJavaDouble(value: string): number | undefined {
  const trimmed = value.trim();
  if (DECIMAL_DOUBLE.test(trimmed)) return Number(trimmed.replace(/[fFdD]$/, ""));
  const hex = HEX_DOUBLE.exec(trimmed);
  if (hex === null) return undefined;
  const [, sign, whole = "", fraction = "", exponent = "0"] = hex;
  if (whole === "" && fraction === "") return undefined;
  let mantissa = 0;
  for (const digit of whole + fraction) mantissa = mantissa * 16 + Number.parseInt(digit, 16);
  const magnitude = mantissa * 2 ** (Number(exponent) - 4 * fraction.length);
  return sign === "-" ? -magnitude : magnitude;
}

/**
 * Java's Double.toString: plain decimals with at least one fractional digit between 10^-3 and 10^7,
 * "computerized scientific notation" (1.0E-4, 1.7976931348623157E308) outside, the shortest digits that
 * read back as the same double (as JavaScript's).
 */
export function javaDoubleToString(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "Infinity";
  if (value === -Infinity) return "-Infinity";
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const magnitude = Math.abs(value);
  if (magnitude >= 1e-3 && magnitude < 1e7) {
    const plain = String(value);
    return plain.includes(".") ? plain : `${plain}.0`;
  }
  const [mantissa, exponent] = value.toExponential().split("e") as [string, string];
  const digits = mantissa.includes(".") ? mantissa : `${mantissa}.0`;
  return `${digits}E${exponent.startsWith("+") ? exponent.slice(1) : exponent}`;
}

/** Java's Boolean parsing in ConfigDef: true or false in any case, after the trim. */
export function parseJavaBoolean(value: string): boolean | undefined {
  const trimmed = value.trim().toLowerCase();
  return trimmed === "true" ? true : trimmed === "false" ? false : undefined;
}

/**
 * ConfigDef's LIST parsing: the trimmed value split at commas with the whitespace around them, trailing
 * empty items kept; an empty value is the empty list.
 */
export function parseJavaList(value: string): string[] {
  const trimmed = value.trim();
  return trimmed === "" ? [] : trimmed.split(/\s*,\s*/);
}

/** How Java prints a List<String> in a ConfigException: "[a, b]". */
export function javaListToString(items: readonly string[]): string {
  return `[${items.join(", ")}]`;
}

/** A value check: the full refusal for `value` of config `name`, or null. */
export type ValueCheck = (value: string, name: string) => string | null;

/** LONG or INT, at least `min` and at most `max` (Apache's atLeast / between). */
export function integerIn(type: "LONG" | "INT", min?: bigint, max?: bigint): ValueCheck {
  return (value, name) => {
    const parsed = parseJavaInteger(value, type);
    if (parsed === undefined) return invalidValue(name, value, `Not a number of type ${type}`);
    if (min !== undefined && parsed < min) return invalidValue(name, parsed.toString(), `Value must be at least ${min}`);
    if (max !== undefined && parsed > max) return invalidValue(name, parsed.toString(), `Value must be no more than ${max}`);
    return null;
  };
}

/** DOUBLE, at least `min` and at most `max` when given. NaN passes both bounds, as it does in Java. */
export function doubleIn(min?: number, max?: number): ValueCheck {
  return (value, name) => {
    const parsed = parseJavaDouble(value);
    if (parsed === undefined) return invalidValue(name, value, "Not a number of type DOUBLE");
    if (min !== undefined && parsed < min) return invalidValue(name, javaDoubleToString(parsed), `Value must be at least ${min}`);
    if (max !== undefined && parsed > max) return invalidValue(name, javaDoubleToString(parsed), `Value must be no more than ${max}`);
    return null;
  };
}

export const booleanValue: ValueCheck = (value, name) =>
  parseJavaBoolean(value) === undefined ? invalidValue(name, value, "Expected value to be either true or false") : null;

/** STRING, one of `choices` exactly (case-sensitive, after the trim): Apache's ValidString.in. */
export function stringIn(choices: readonly string[]): ValueCheck {
  return (value, name) => {
    const trimmed = value.trim();
    return choices.includes(trimmed) ? null : invalidValue(name, trimmed, `String must be one of: ${choices.join(", ")}`);
  };
}

/** LIST whose every item is one of `choices`: Apache's ValidList.in, which names the first bad item. */
export function listOf(choices: readonly string[]): ValueCheck {
  return (value, name) => {
    const bad = parseJavaList(value).find((item) => !choices.includes(item));
    return bad === undefined ? null : invalidValue(name, bad, `String must be one of: ${choices.join(", ")}`);
  };
}

/** How DescribeConfigs shows a valid value of `type`: parsed, then printed as Apache prints it. */
export function canonicalValue(type: ConfigType, value: string): string {
  switch (type) {
    case "LONG":
    case "INT":
      return (parseJavaInteger(value, type) ?? value).toString();
    case "DOUBLE": {
      const parsed = parseJavaDouble(value);
      return parsed === undefined ? value : javaDoubleToString(parsed);
    }
    case "BOOLEAN":
      return String(parseJavaBoolean(value) ?? value);
    case "STRING":
      return value.trim();
    case "LIST":
      return parseJavaList(value).join(",");
  }
}

/**
 * The number a valid value stands for. LONG values beyond 2^53 (Long.MAX_VALUE means "no limit") become
 * the nearest double, which still compares correctly with any time or size.
 */
export function numericValue(type: "LONG" | "INT" | "DOUBLE", value: string): number {
  if (type === "DOUBLE") return parseJavaDouble(value) ?? Number.NaN;
  return Number(parseJavaInteger(value, type) ?? Number.NaN);
}
