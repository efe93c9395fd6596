#!/usr/bin/env bun
/**
 * Generates the wire codecs in src/protocol/generated/ from Apache Kafka's JSON message schemas
 * (schemas/kafka/message/, copied from Apache Kafka with its LICENSE and NOTICE), and the error table in
 * src/errors/generated/ from schemas/kafka/errors.json.
 *
 * Every field's versions, nullable versions, tagged versions, field-level flexible versions and default come
 * from the schema. The emitted code is specialised per message (straight-line reads and writes with version
 * checks), not an interpreter, because Produce and Fetch sit on the hot path.
 *
 *   bun scripts/gen-protocol.ts           write the files
 *   bun scripts/gen-protocol.ts --check   exit 1 if a generated file differs from what is committed
 */
import { readFileSync, writeFileSync, mkdirSync, readdirSync, existsSync, unlinkSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const schemaDir = join(root, "schemas/kafka/message");
const outDir = join(root, "src/protocol/generated");
const errorsOutDir = join(root, "src/errors/generated");

/** The APIs bunka serves now or in its open issues. Request and response schemas are generated for each. */
export const servedApis = [
  "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
  "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "SaslHandshake",
  "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "AddPartitionsToTxn",
  "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit", "DescribeConfigs", "CreatePartitions",
  "AlterConfigs", "DeleteGroups", "IncrementalAlterConfigs", "OffsetDelete", "DescribeCluster", "DescribeProducers",
  "DescribeTransactions", "ListTransactions", "OffsetForLeaderEpoch", "DescribeAcls", "CreateAcls", "DeleteAcls",
  "SaslAuthenticate", "DescribeUserScramCredentials", "AlterUserScramCredentials", "DescribeClientQuotas",
  "DescribeLogDirs", "UpdateFeatures", "DescribeTopicPartitions",
];

// ---------------------------------------------------------------------------------------------- schema

interface FieldSpec {
  name: string;
  type: string;
  versions?: string;
  nullableVersions?: string;
  taggedVersions?: string;
  tag?: number;
  default?: string | number | boolean;
  fields?: FieldSpec[];
  flexibleVersions?: string;
  ignorable?: boolean;
  about?: string;
}

interface MessageSpec {
  apiKey?: number;
  type: "request" | "response" | "header" | "data";
  name: string;
  validVersions: string;
  flexibleVersions: string;
  latestVersionUnstable?: boolean;
  fields: FieldSpec[];
  commonStructs?: { name: string; versions: string; fields: FieldSpec[] }[];
}

interface Range {
  lo: number;
  hi: number; // Infinity for "N+"
}

function parseRange(text: string | undefined): Range {
  if (text === undefined || text === "none") return { lo: 1, hi: 0 };
  const t = text.trim();
  if (t.endsWith("+")) return { lo: Number(t.slice(0, -1)), hi: Infinity };
  const dash = t.indexOf("-");
  if (dash >= 0) return { lo: Number(t.slice(0, dash)), hi: Number(t.slice(dash + 1)) };
  return { lo: Number(t), hi: Number(t) };
}
const isEmpty = (r: Range) => r.lo > r.hi;
const intersect = (a: Range, b: Range): Range => ({ lo: Math.max(a.lo, b.lo), hi: Math.min(a.hi, b.hi) });
const covers = (outer: Range, inner: Range) => isEmpty(inner) || (outer.lo <= inner.lo && outer.hi >= inner.hi);

/** Reads a schema file: JSON with // comments. */
export function readSchema(path: string): MessageSpec {
  const text = readFileSync(path, "utf8")
    .split("\n")
    .map((line) => {
      // Strip // comments that are not inside a string.
      let inString = false;
      for (let i = 0; i < line.length; i++) {
        const c = line[i];
        if (c === '"' && line[i - 1] !== "\\") inString = !inString;
        if (!inString && c === "/" && line[i + 1] === "/") return line.slice(0, i);
      }
      return line;
    })
    .join("\n");
  return JSON.parse(text) as MessageSpec;
}

// ---------------------------------------------------------------------------------------------- naming

const camel = (name: string) => name.charAt(0).toLowerCase() + name.slice(1);
export const kebab = (name: string) => name.replace(/([a-z0-9])([A-Z])/g, "$1-$2").toLowerCase();

const primitives = new Set(["bool", "int8", "int16", "uint16", "int32", "int64", "float64", "string", "bytes", "records", "uuid"]);

interface Struct {
  name: string;
  fields: FieldSpec[];
}

// ---------------------------------------------------------------------------------------------- generator

class MessageGenerator {
  private readonly structs = new Map<string, Struct>();
  /** Structs whose default must be recognisable because a tagged field holds them. */
  private readonly taggedStructs = new Set<string>();
  private readonly valid: Range;
  private readonly flexible: Range;
  private readonly out: string[] = [];

  constructor(private readonly spec: MessageSpec, private readonly sourceFile: string) {
    this.valid = parseRange(spec.validVersions);
    this.flexible = parseRange(spec.flexibleVersions);
    for (const common of spec.commonStructs ?? []) {
      this.structs.set(common.name, { name: common.name, fields: common.fields });
      this.collect(common.fields);
    }
    this.collect(spec.fields);
    this.markTaggedStructs(spec.fields);
    for (const common of spec.commonStructs ?? []) this.markTaggedStructs(common.fields);
  }

  /** Finds struct-typed tagged fields: their structs (and the structs inside them) need an isDefault check. */
  private markTaggedStructs(fields: FieldSpec[]): void {
    for (const f of fields) {
      if (f.taggedVersions !== undefined && !f.type.startsWith("[]") && !primitives.has(f.type)) this.markTagged(f.type);
      if (f.fields) this.markTaggedStructs(f.fields);
    }
  }
  private markTagged(type: string): void {
    if (this.taggedStructs.has(type)) return;
    this.taggedStructs.add(type);
    for (const f of this.structOf(type).fields) {
      if (!f.type.startsWith("[]") && !primitives.has(f.type)) this.markTagged(f.type);
    }
  }

  /** Registers inline struct definitions (fields with their own "fields") under their type names. */
  private collect(fields: FieldSpec[]): void {
    for (const f of fields) {
      if (!f.fields) continue;
      const name = f.type.startsWith("[]") ? f.type.slice(2) : f.type;
      this.structs.set(name, { name, fields: f.fields });
      this.collect(f.fields);
    }
  }

  private elementType(f: FieldSpec): string | undefined {
    return f.type.startsWith("[]") ? f.type.slice(2) : undefined;
  }
  private isStruct(type: string): boolean {
    return !primitives.has(type);
  }
  private structOf(type: string): Struct {
    const s = this.structs.get(type);
    if (!s) throw new Error(`${this.spec.name}: unknown struct type ${type}`);
    return s;
  }

  private tsType(f: FieldSpec, init: boolean): string {
    const nullable = !isEmpty(parseRange(f.nullableVersions));
    const suffix = init ? "Init" : "";
    const base = (t: string): string => {
      switch (t) {
        case "bool":
          return "boolean";
        case "int8":
        case "int16":
        case "uint16":
        case "int32":
        case "int64":
        case "float64":
          return "number";
        case "string":
        case "uuid":
          return "string";
        case "bytes":
        case "records":
          return "Uint8Array";
        default:
          return `${this.structTypeName(t)}${suffix}`;
      }
    };
    const el = this.elementType(f);
    const t = el ? `${base(el)}[]` : base(f.type);
    return nullable ? `${t} | null` : t;
  }

  private structTypeName(name: string): string {
    // Struct names are unique within one message; prefixing with the message name keeps them unique across
    // modules too, so handlers can import request and response types side by side.
    return `${this.spec.name}${name === this.spec.name ? "" : "_" + name}`;
  }

  private defaultExpr(f: FieldSpec): string {
    const d = f.default;
    const el = this.elementType(f);
    if (d === "null") return "null";
    if (el) return "[]";
    switch (f.type) {
      case "bool":
        return d === undefined ? "false" : String(d === true || d === "true");
      case "int8":
      case "int16":
      case "uint16":
      case "int32":
      case "int64":
      case "float64": {
        if (d === undefined || d === "") return "0";
        const n = typeof d === "number" ? d : String(d).startsWith("0x") ? parseInt(String(d), 16) : Number(d);
        if (!Number.isFinite(n)) throw new Error(`${this.spec.name}.${f.name}: bad default ${d}`);
        return String(n);
      }
      case "string":
        return JSON.stringify(d === undefined ? "" : String(d));
      case "uuid":
        return "ZERO_UUID";
      case "bytes":
        return "EMPTY_BYTES";
      case "records":
        return isEmpty(parseRange(f.nullableVersions)) ? "EMPTY_BYTES" : "null";
      default:
        return `default${this.structTypeName(f.type)}()`;
    }
  }

  /** A condition that is true when `version` lies in `r`, simplified against what `ctx` already guarantees. */
  private cond(r: Range, ctx: Range): string | undefined {
    const parts: string[] = [];
    if (r.lo > ctx.lo) parts.push(`version >= ${r.lo}`);
    if (r.hi < ctx.hi) parts.push(`version <= ${r.hi}`);
    return parts.length ? parts.join(" && ") : undefined;
  }

  /** "true"/"false" when flexibility is decided by `ctx`, otherwise the runtime expression. */
  private flexIn(ctx: Range, flexRange: Range): string {
    if (covers(flexRange, ctx)) return "true";
    if (isEmpty(intersect(flexRange, ctx))) return "false";
    return "flexible";
  }

  private fieldFlex(f: FieldSpec): Range {
    return f.flexibleVersions !== undefined ? parseRange(f.flexibleVersions) : this.flexible;
  }

  // ------------------------------------------------------------------ reads

  private readScalar(type: string, nullableCond: string | undefined, flex: string, r: string, ctxVar = "version"): string {
    const pick = (compact: string, classic: string) =>
      flex === "true" ? compact : flex === "false" ? classic : `(${flex} ? ${compact} : ${classic})`;
    const nullable = (n: string, plain: string) =>
      nullableCond === undefined ? plain : nullableCond === "true" ? n : `(${nullableCond} ? ${n} : ${plain})`;
    switch (type) {
      case "bool":
        return `${r}.bool()`;
      case "int8":
        return `${r}.int8()`;
      case "int16":
        return `${r}.int16()`;
      case "uint16":
        return `${r}.uint16()`;
      case "int32":
        return `${r}.int32()`;
      case "int64":
        return `${r}.int64()`;
      case "float64":
        return `${r}.float64()`;
      case "uuid":
        return `${r}.uuid()`;
      case "string":
        return nullable(
          pick(`${r}.compactNullableString()`, `${r}.nullableString()`),
          pick(`${r}.compactString()`, `${r}.string()`),
        );
      case "bytes":
      case "records":
        return nullable(
          pick(`${r}.compactNullableBytes()`, `${r}.nullableBytes()`),
          pick(`${r}.compactBytes()`, `${r}.bytes()`),
        );
      default:
        return `read${this.structTypeName(type)}(${r}, ${ctxVar})`;
    }
  }

  private nullableCondFor(f: FieldSpec, ctx: Range): string | undefined {
    const n = parseRange(f.nullableVersions);
    const present = intersect(n, ctx);
    if (isEmpty(present)) return undefined;
    return this.cond(n, ctx) ?? "true";
  }

  /** Emits statements that read field `f` into local `target`, given the version range `ctx` in force. */
  private emitRead(f: FieldSpec, ctx: Range, target: string, r: string, indent: string, lines: string[]): void {
    const flex = this.flexIn(ctx, this.fieldFlex(f));
    const nullCond = this.nullableCondFor(f, ctx);
    const el = this.elementType(f);
    if (el) {
      const lenExpr =
        nullCond === undefined
          ? flex === "true"
            ? `${r}.compactArrayLength()`
            : flex === "false"
              ? `${r}.arrayLength()`
              : `(${flex} ? ${r}.compactArrayLength() : ${r}.arrayLength())`
          : (() => {
              const n = flex === "true" ? `${r}.compactNullableArrayLength()` : flex === "false" ? `${r}.nullableArrayLength()` : `(${flex} ? ${r}.compactNullableArrayLength() : ${r}.nullableArrayLength())`;
              const p = flex === "true" ? `${r}.compactArrayLength()` : flex === "false" ? `${r}.arrayLength()` : `(${flex} ? ${r}.compactArrayLength() : ${r}.arrayLength())`;
              return nullCond === "true" ? n : `(${nullCond} ? ${n} : ${p})`;
            })();
      const n = `n_${target}`;
      lines.push(`${indent}{`);
      lines.push(`${indent}  const ${n} = ${lenExpr};`);
      const elemRead = this.readScalar(el, undefined, flex, r);
      if (nullCond !== undefined) {
        lines.push(`${indent}  if (${n} < 0) ${target} = null;`);
        lines.push(`${indent}  else {`);
        lines.push(`${indent}    const a: ${this.tsType({ ...f, nullableVersions: undefined }, false)} = [];`);
        lines.push(`${indent}    for (let i = 0; i < ${n}; i++) a.push(${elemRead});`);
        lines.push(`${indent}    ${target} = a;`);
        lines.push(`${indent}  }`);
      } else {
        lines.push(`${indent}  const a: ${this.tsType(f, false)} = [];`);
        lines.push(`${indent}  for (let i = 0; i < ${n}; i++) a.push(${elemRead});`);
        lines.push(`${indent}  ${target} = a;`);
      }
      lines.push(`${indent}}`);
      return;
    }
    if (this.isStruct(f.type) && nullCond !== undefined) {
      // Nullable structs are prefixed by an int8: -1 for null, 1 for present.
      const readIt = this.readScalar(f.type, undefined, flex, r);
      const guard = nullCond === "true" ? "" : `${nullCond} && `;
      lines.push(`${indent}if (${guard}${r}.int8() < 0) ${target} = null;`);
      lines.push(`${indent}else ${target} = ${readIt};`);
      return;
    }
    lines.push(`${indent}${target} = ${this.readScalar(f.type, nullCond, flex, r)};`);
  }

  // ------------------------------------------------------------------ writes

  /** A statement writing `value` of a scalar or struct type; `nullable` selects the nullable encoding. */
  private writeScalar(type: string, value: string, nullable: boolean, flex: string, w: string): string {
    const pick = (compact: string, classic: string) =>
      flex === "true" ? compact : flex === "false" ? classic : `if (${flex}) ${compact}; else ${classic}`;
    switch (type) {
      case "bool":
        return `${w}.bool(${value})`;
      case "int8":
      case "int16":
      case "uint16":
      case "int32":
      case "int64":
      case "float64":
      case "uuid":
        return `${w}.${type}(${value})`;
      case "string":
        return nullable
          ? pick(`${w}.compactNullableString(${value})`, `${w}.nullableString(${value})`)
          : pick(`${w}.compactString(${value})`, `${w}.string(${value})`);
      case "bytes":
      case "records":
        return nullable
          ? pick(`${w}.compactNullableBytes(${value})`, `${w}.nullableBytes(${value})`)
          : pick(`${w}.compactBytes(${value})`, `${w}.bytes(${value})`);
      default:
        return `write${this.structTypeName(type)}(${w}, version, ${value})`;
    }
  }

  private emitWrite(f: FieldSpec, ctx: Range, value: string, w: string, indent: string, lines: string[]): void {
    const flex = this.flexIn(ctx, this.fieldFlex(f));
    const nullCond = this.nullableCondFor(f, ctx);
    const el = this.elementType(f);
    const notNullable = `throw new Error("${this.spec.name}: ${f.name} is not nullable in version " + version)`;
    const pick = (compact: string, classic: string) =>
      flex === "true" ? compact : flex === "false" ? classic : `if (${flex}) ${compact}; else ${classic}`;
    if (el) {
      lines.push(`${indent}{`);
      lines.push(`${indent}  const a = ${value};`);
      if (nullCond === undefined) {
        lines.push(`${indent}  if (a === null) ${notNullable};`);
      } else {
        if (nullCond !== "true") lines.push(`${indent}  if (a === null && !(${nullCond})) ${notNullable};`);
        lines.push(`${indent}  if (a === null) { ${pick(`${w}.uvarint(0)`, `${w}.int32(-1)`)}; }`);
      }
      lines.push(`${indent}  ${nullCond === undefined ? "" : "else "}{`);
      lines.push(`${indent}    ${pick(`${w}.uvarint(a.length + 1)`, `${w}.int32(a.length)`)};`);
      lines.push(`${indent}    for (let i = 0; i < a.length; i++) { ${this.writeScalar(el, "a[i]!", false, flex, w)}; }`);
      lines.push(`${indent}  }`);
      lines.push(`${indent}}`);
      return;
    }
    const nullableType = this.isStruct(f.type) || f.type === "string" || f.type === "bytes" || f.type === "records";
    if (!nullableType) {
      lines.push(`${indent}${this.writeScalar(f.type, value, false, flex, w)};`);
      return;
    }
    lines.push(`${indent}{`);
    lines.push(`${indent}  const v = ${value};`);
    if (nullCond === undefined) {
      lines.push(`${indent}  if (v === null) ${notNullable};`);
      lines.push(`${indent}  ${this.writeScalar(f.type, "v", false, flex, w)};`);
    } else if (this.isStruct(f.type)) {
      // Nullable structs carry an int8 marker: -1 for null, 1 for present.
      if (nullCond !== "true") lines.push(`${indent}  if (v === null && !(${nullCond})) ${notNullable};`);
      const marker = nullCond === "true" ? `${w}.int8(1); ` : `if (${nullCond}) ${w}.int8(1); `;
      lines.push(`${indent}  if (v === null) ${w}.int8(-1);`);
      lines.push(`${indent}  else { ${marker}${this.writeScalar(f.type, "v", false, flex, w)}; }`);
    } else if (nullCond === "true") {
      lines.push(`${indent}  ${this.writeScalar(f.type, "v", true, flex, w)};`);
    } else {
      lines.push(`${indent}  if (${nullCond}) { ${this.writeScalar(f.type, "v", true, flex, w)}; }`);
      lines.push(`${indent}  else { if (v === null) ${notNullable}; ${this.writeScalar(f.type, "v", false, flex, w)}; }`);
    }
    lines.push(`${indent}}`);
  }

  /** An expression that is true when `value` equals the field's default (tagged fields are written only when not). */
  private isDefaultExpr(f: FieldSpec, value: string): string {
    const d = this.defaultExpr(f);
    if (this.elementType(f)) return d === "null" ? `${value} === null` : `(${value} !== null && ${value}.length === 0)`;
    if (d === "null") return `${value} === null`;
    if (this.isStruct(f.type)) return `isDefault${this.structTypeName(f.type)}(${value})`;
    if (f.type === "bytes" || f.type === "records") return `(${value} !== null && ${value}.length === 0)`;
    return `${value} === ${d}`;
  }

  // ------------------------------------------------------------------ structs

  private emitStruct(name: string, fields: FieldSpec[], isTop: boolean): void {
    const typeName = isTop ? this.spec.name : this.structTypeName(name);
    const ctx = this.valid;
    const live = fields.filter((f) => !isEmpty(intersect(parseRange(f.versions), ctx)));
    const out = this.out;

    // Types: the decoded shape (every field present) and the Init shape encoders accept (defaults fill gaps).
    out.push(`export interface ${typeName} {`);
    for (const f of live) {
      if (f.about) out.push(`  /** ${f.about.replace(/\*\//g, "* /")} (versions ${f.versions}${f.taggedVersions ? `, tagged ${f.taggedVersions} tag ${f.tag}` : ""}) */`);
      out.push(`  ${camel(f.name)}: ${this.tsType(f, false)};`);
    }
    out.push(`  /** Tagged fields this schema does not know, kept so that re-encoding preserves them. */`);
    out.push(`  _unknownTaggedFields?: TaggedField[] | undefined;`);
    out.push(`}`);
    out.push(``);
    out.push(`export interface ${typeName}Init {`);
    for (const f of live) out.push(`  ${camel(f.name)}?: ${this.tsType(f, true)};`);
    out.push(`  _unknownTaggedFields?: TaggedField[] | undefined;`);
    out.push(`}`);
    out.push(``);

    // Default factory and default check (used for tagged struct fields and missing fields).
    out.push(`export function default${typeName}(): ${typeName} {`);
    out.push(`  return { ${live.map((f) => `${camel(f.name)}: ${this.defaultExpr(f)}`).join(", ")} };`);
    out.push(`}`);
    out.push(``);
    if (this.taggedStructs.has(name)) {
      out.push(`function isDefault${typeName}(s: ${typeName}Init): boolean {`);
      const checks = live.map((f) => {
        const v = `s.${camel(f.name)}`;
        return `(${v} === undefined || ${this.isDefaultExpr(f, v)})`;
      });
      out.push(`  return ${checks.length ? checks.join(" && ") : "true"} && !s._unknownTaggedFields?.length;`);
      out.push(`}`);
      out.push(``);
    }

    const anyFlexible = !isEmpty(intersect(this.flexible, ctx));
    const flexCond = this.cond(this.flexible, ctx);
    const tagged = live
      .filter((f) => f.taggedVersions !== undefined)
      .sort((a, b) => (a.tag ?? 0) - (b.tag ?? 0));
    const plain = live.filter((f) => f.taggedVersions === undefined);

    // Reader.
    const fn = isTop ? `decode${typeName}` : `read${typeName}`;
    out.push(`${isTop ? "export " : ""}function ${fn}(r: Reader, version: number): ${typeName} {`);
    if (anyFlexible && flexCond !== undefined) out.push(`  const flexible = ${flexCond};`);
    const body: string[] = [];
    for (const f of live) {
      body.push(`  let ${camel(f.name)}: ${this.tsType(f, false)} = ${this.defaultExpr(f)};`);
    }
    body.push(`  let _unknownTaggedFields: TaggedField[] | undefined;`);
    for (const f of plain) {
      const c = this.cond(parseRange(f.versions), ctx);
      if (c) {
        body.push(`  if (${c}) {`);
        this.emitRead(f, intersect(ctx, parseRange(f.versions)), camel(f.name), "r", "    ", body);
        body.push(`  }`);
      } else {
        this.emitRead(f, ctx, camel(f.name), "r", "  ", body);
      }
    }
    if (anyFlexible) {
      const guard = flexCond === undefined ? "" : "if (flexible) ";
      if (tagged.length === 0) {
        body.push(`  ${guard}_unknownTaggedFields = r.taggedFields(() => false);`);
      } else {
        body.push(`  ${guard}_unknownTaggedFields = r.taggedFields((tag, tr) => {`);
        body.push(`    switch (tag) {`);
        for (const f of tagged) {
          const tv = intersect(parseRange(f.taggedVersions), parseRange(f.versions));
          const c = this.cond(tv, ctx);
          body.push(`      case ${f.tag}: {`);
          if (c) body.push(`        if (!(${c})) return false;`);
          this.emitRead(f, intersect(ctx, intersect(tv, this.flexible)), camel(f.name), "tr", "        ", body);
          body.push(`        return true;`);
          body.push(`      }`);
        }
        body.push(`      default:`);
        body.push(`        return false;`);
        body.push(`    }`);
        body.push(`  });`);
      }
    }
    out.push(...body);
    out.push(`  return { ${[...live.map((f) => camel(f.name)), "_unknownTaggedFields"].join(", ")} };`);
    out.push(`}`);
    out.push(``);

    // Writer.
    const wfn = isTop ? `encode${typeName}` : `write${typeName}`;
    out.push(`${isTop ? "export " : ""}function ${wfn}(w: Writer, version: number, m: ${typeName}Init): void {`);
    if (anyFlexible && flexCond !== undefined) out.push(`  const flexible = ${flexCond};`);
    for (const f of plain) {
      const c = this.cond(parseRange(f.versions), ctx);
      // Nullable fields may hold null on purpose: only undefined falls back to the default.
      const value = isEmpty(parseRange(f.nullableVersions))
        ? `(m.${camel(f.name)} ?? ${this.defaultExpr(f)})`
        : `(m.${camel(f.name)} === undefined ? ${this.defaultExpr(f)} : m.${camel(f.name)})`;
      if (c) {
        out.push(`  if (${c}) {`);
        this.emitWrite(f, intersect(ctx, parseRange(f.versions)), value, "w", "    ", out);
        out.push(`  }`);
      } else {
        this.emitWrite(f, ctx, value, "w", "  ", out);
      }
    }
    if (anyFlexible) {
      const guard = flexCond === undefined ? "" : "if (flexible) ";
      if (tagged.length === 0) {
        out.push(`  ${guard}writeTaggedFields(w, m._unknownTaggedFields, undefined);`);
      } else {
        out.push(`  ${guard}{`);
        out.push(`    const known: [number, (tw: Writer) => void][] = [];`);
        for (const f of tagged) {
          const tv = intersect(parseRange(f.taggedVersions), parseRange(f.versions));
          const c = this.cond(tv, ctx);
          const v = `m.${camel(f.name)}`;
          out.push(`    if (${c ? `${c} && ` : ""}${v} !== undefined && !(${this.isDefaultExpr(f, v)})) {`);
          out.push(`      const value = ${v};`);
          out.push(`      known.push([${f.tag}, (tw) => {`);
          this.emitWrite(f, intersect(ctx, intersect(tv, this.flexible)), "value", "tw", "        ", out);
          out.push(`      }]);`);
          out.push(`    }`);
        }
        out.push(`    writeTaggedFields(w, m._unknownTaggedFields, known);`);
        out.push(`  }`);
      }
    }
    out.push(`}`);
    out.push(``);
  }

  generate(): string {
    const spec = this.spec;
    const out = this.out;
    out.push(`// GENERATED by scripts/gen-protocol.ts from schemas/kafka/message/${this.sourceFile}. DO NOT EDIT.`);
    out.push(`// Apache Kafka message schema, Apache License 2.0 (schemas/kafka/LICENSE, NOTICE).`);
    out.push(`/* eslint-disable */`);
    out.push(`import type { Reader, TaggedField } from "../reader.ts";`);
    out.push(`import type { Writer } from "../writer.ts";`);
    const importAt = out.length;
    out.push(``);
    out.push(`export const ${spec.name}Schema = {`);
    if (spec.apiKey !== undefined) out.push(`  apiKey: ${spec.apiKey},`);
    out.push(`  name: ${JSON.stringify(spec.name)},`);
    out.push(`  minVersion: ${this.valid.lo},`);
    out.push(`  maxVersion: ${this.valid.hi},`);
    out.push(`  /** First flexible version, or -1 when none is. */`);
    out.push(`  flexibleMinVersion: ${isEmpty(this.flexible) ? -1 : this.flexible.lo},`);
    out.push(`  latestVersionUnstable: ${spec.latestVersionUnstable === true},`);
    out.push(`} as const;`);
    out.push(``);
    // Emit nested structs first (children before parents is not required in JS; order by discovery).
    for (const [name, s] of this.structs) {
      if (name === spec.name) continue;
      this.emitStruct(name, s.fields, false);
    }
    this.emitStruct(spec.name, spec.fields, true);
    const text = out.join("\n");
    const support = ["EMPTY_BYTES", "ZERO_UUID", "writeTaggedFields"].filter((name) => text.includes(name));
    if (support.length) out.splice(importAt, 0, `import { ${support.join(", ")} } from "../codec-support.ts";`);
    // A parameter that a function never reads is named _version (the compiler checks unused parameters).
    const joined = out
      .join("\n")
      .replace(/(function \w+\((?:r: Reader|w: Writer), )version(: number[^\n]*\n)([\s\S]*?\n)\}\n/g, (all, head, sig, body) =>
        /\bversion\b/.test(body) ? all : `${head}_version${sig}${body}}\n`,
      );
    return joined.replace(/\n{3,}/g, "\n\n").trimEnd() + "\n";
  }
}

// ---------------------------------------------------------------------------------------------- errors

function generateErrors(): string {
  const errors = JSON.parse(readFileSync(join(root, "schemas/kafka/errors.json"), "utf8")) as {
    code: number;
    name: string;
    exception: string | null;
    retriable: boolean;
  }[];
  const lines = [
    `// GENERATED by scripts/gen-protocol.ts from schemas/kafka/errors.json. DO NOT EDIT.`,
    `// Apache Kafka's error table, Apache License 2.0 (schemas/kafka/LICENSE, NOTICE).`,
    ``,
    `/** Kafka error codes by name. */`,
    `export const ErrorCode = {`,
    ...errors.map((e) => `  ${e.name}: ${e.code},`),
    `} as const;`,
    ``,
    `export type ErrorCodeName = keyof typeof ErrorCode;`,
    `export type ErrorCodeValue = (typeof ErrorCode)[ErrorCodeName];`,
    ``,
    `export interface ErrorInfo {`,
    `  code: number;`,
    `  name: ErrorCodeName;`,
    `  /** The Java client's exception class, or null for NONE. */`,
    `  exception: string | null;`,
    `  /** Whether the Java client treats the error as retriable. */`,
    `  retriable: boolean;`,
    `}`,
    ``,
    `export const errorInfoByCode: ReadonlyMap<number, ErrorInfo> = new Map<number, ErrorInfo>([`,
    ...errors.map(
      (e) => `  [${e.code}, { code: ${e.code}, name: ${JSON.stringify(e.name)}, exception: ${JSON.stringify(e.exception)}, retriable: ${e.retriable} }],`,
    ),
    `]);`,
    ``,
  ];
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------- index

function generateIndex(apis: { name: string; apiKey: number; request: string; response: string }[]): string {
  const lines = [
    `// GENERATED by scripts/gen-protocol.ts. DO NOT EDIT.`,
    `// One entry per API bunka has codecs for: its schema facts and its request/response codecs.`,
    `import type { Reader } from "../reader.ts";`,
    `import type { Writer } from "../writer.ts";`,
  ];
  for (const a of apis) {
    lines.push(`import * as ${camel(a.name)}Request from "./${kebab(a.request)}.ts";`);
    lines.push(`import * as ${camel(a.name)}Response from "./${kebab(a.response)}.ts";`);
  }
  lines.push(
    ``,
    `export interface ApiCodecs {`,
    `  apiKey: number;`,
    `  name: string;`,
    `  minVersion: number;`,
    `  maxVersion: number;`,
    `  flexibleMinVersion: number;`,
    `  latestVersionUnstable: boolean;`,
    `  decodeRequest(r: Reader, version: number): unknown;`,
    `  encodeRequest(w: Writer, version: number, m: any): void;`,
    `  decodeResponse(r: Reader, version: number): unknown;`,
    `  encodeResponse(w: Writer, version: number, m: any): void;`,
    `  defaultRequest(): unknown;`,
    `  defaultResponse(): unknown;`,
    `}`,
    ``,
    `export const apiCodecs: readonly ApiCodecs[] = [`,
  );
  for (const a of apis) {
    const rq = `${camel(a.name)}Request`;
    const rs = `${camel(a.name)}Response`;
    lines.push(`  {`);
    lines.push(`    apiKey: ${a.apiKey},`);
    lines.push(`    name: ${JSON.stringify(a.name)},`);
    lines.push(`    minVersion: ${rq}.${a.request}Schema.minVersion,`);
    lines.push(`    maxVersion: ${rq}.${a.request}Schema.maxVersion,`);
    lines.push(`    flexibleMinVersion: ${rq}.${a.request}Schema.flexibleMinVersion,`);
    lines.push(`    latestVersionUnstable: ${rq}.${a.request}Schema.latestVersionUnstable,`);
    lines.push(`    decodeRequest: ${rq}.decode${a.request},`);
    lines.push(`    encodeRequest: ${rq}.encode${a.request},`);
    lines.push(`    decodeResponse: ${rs}.decode${a.response},`);
    lines.push(`    encodeResponse: ${rs}.encode${a.response},`);
    lines.push(`    defaultRequest: ${rq}.default${a.request},`);
    lines.push(`    defaultResponse: ${rs}.default${a.response},`);
    lines.push(`  },`);
  }
  lines.push(`];`, ``, `export const apiCodecsByKey: ReadonlyMap<number, ApiCodecs> = new Map(apiCodecs.map((a) => [a.apiKey, a]));`, ``);
  return lines.join("\n");
}

// ---------------------------------------------------------------------------------------------- main

function main(): void {
  const check = process.argv.includes("--check");
  const files = new Map<string, string>();
  const apis: { name: string; apiKey: number; request: string; response: string }[] = [];

  for (const header of ["RequestHeader", "ResponseHeader"]) {
    const spec = readSchema(join(schemaDir, `${header}.json`));
    files.set(join(outDir, `${kebab(header)}.ts`), new MessageGenerator(spec, `${header}.json`).generate());
  }
  for (const api of servedApis) {
    const req = readSchema(join(schemaDir, `${api}Request.json`));
    const res = readSchema(join(schemaDir, `${api}Response.json`));
    if (req.apiKey === undefined || req.apiKey !== res.apiKey) throw new Error(`${api}: api keys disagree`);
    files.set(join(outDir, `${kebab(req.name)}.ts`), new MessageGenerator(req, `${api}Request.json`).generate());
    files.set(join(outDir, `${kebab(res.name)}.ts`), new MessageGenerator(res, `${api}Response.json`).generate());
    apis.push({ name: api, apiKey: req.apiKey, request: req.name, response: res.name });
  }
  apis.sort((a, b) => a.apiKey - b.apiKey);
  files.set(join(outDir, "index.ts"), generateIndex(apis));
  files.set(join(errorsOutDir, "error-codes.ts"), generateErrors());

  let differences = 0;
  for (const [path, content] of files) {
    const current = existsSync(path) ? readFileSync(path, "utf8") : undefined;
    if (current === content) continue;
    differences++;
    if (check) console.error(`out of date: ${path.slice(root.length + 1)}`);
    else {
      mkdirSync(join(path, ".."), { recursive: true });
      writeFileSync(path, content);
    }
  }
  // Files in the output directory that the generator no longer produces are stale.
  for (const dir of [outDir, errorsOutDir]) {
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (files.has(path)) continue;
      differences++;
      if (check) console.error(`stale generated file: ${path.slice(root.length + 1)}`);
      else unlinkSync(path);
    }
  }
  if (check && differences > 0) {
    console.error(`${differences} generated file(s) differ: run bun scripts/gen-protocol.ts and commit`);
    process.exit(1);
  }
  console.log(check ? "generated code is up to date" : `generated ${files.size} files (${differences} changed)`);
}

if (import.meta.main) main();
