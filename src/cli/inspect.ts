/**
 * `bunka topics`, `bunka txn ...` and `bunka cluster`: a running broker inspected over its HTTP side-port
 * (side-port.ts), printed as tables for people or, with `--json`, as the side-port's own JSON for scripts.
 *
 *   bunka topics [TOPIC]                      topics; with TOPIC, its partitions (offsets, LSO lag, ...)
 *   bunka cluster                             mode, etcd, this broker's lease, the live members
 *   bunka txn list [--state S] [--min-age D] [--producer-id N] [--limit N]
 *   bunka txn describe ID                     one transaction: partitions, groups, staged offsets, markers
 *   bunka txn abort ID                        abort an Ongoing transaction (BUNKA_ADMIN_TOKEN)
 *
 * Every command takes `--http HOST:PORT` (default BUNKA_HTTP, then 127.0.0.1:9644) and `--json`. Exit 0
 * on success, 2 for bad usage (one line on stderr), 1 when the broker cannot be reached or answers an
 * error (one line: the broker's message).
 */
import { formatBytes, formatDuration, formatMs } from "../http/format.ts";
import {
  TRANSACTION_STATES,
  type ClusterView,
  type MarkerView,
  type PartitionView,
  type TopicDetailView,
  type TopicSummaryView,
  type TransactionDetailView,
  type TransactionView,
} from "../http/ports.ts";
import { clusterHelp, topicsHelp, txnHelp } from "./help.ts";
import { DEFAULT_SIDE_PORT, type FetchLike, SidePortClient, SidePortError, UsageError, sidePortUrl } from "./side-port.ts";
import { printable, renderFacts, renderTable } from "./table.ts";

export interface InspectDeps {
  env: Record<string, string | undefined>;
  stdout(text: string): void;
  stderr(text: string): void;
  fetch: FetchLike;
}

const EXIT_OK = 0;
const EXIT_FAILURE = 1;
const EXIT_USAGE = 2;

/** Partitions shown per transaction in `txn list` before "+N more". */
const LIST_PARTITIONS_SHOWN = 3;

interface Parsed {
  positionals: string[];
  values: Map<string, string>;
  json: boolean;
  help: boolean;
}

/**
 * Flags of one subcommand: `--name value` or `--name=value` for those in `valued`, `--json`, `-h`/`--help`.
 * Anything else starting with `-` is a usage error; so is a positional beyond `maxPositionals`.
 */
function parseArgs(args: readonly string[], valued: readonly string[], maxPositionals: number, command: string): Parsed {
  const parsed: Parsed = { positionals: [], values: new Map(), json: false, help: false };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "-h" || arg === "--help") {
      parsed.help = true;
      continue;
    }
    if (arg === "--json") {
      parsed.json = true;
      continue;
    }
    if (arg === "--") {
      parsed.positionals.push(...args.slice(i + 1));
      break;
    }
    if (arg.startsWith("-") && arg !== "-") {
      const eq = arg.indexOf("=");
      const name = (eq < 0 ? arg : arg.slice(0, eq)).replace(/^--?/, "");
      if (!valued.includes(name)) throw new UsageError(`${command}: unknown flag ${JSON.stringify(arg)} (try bunka ${command.split(" ")[0]} --help)`);
      let value: string | undefined;
      if (eq >= 0) value = arg.slice(eq + 1);
      else {
        value = args[i + 1];
        if (value === undefined || (value.startsWith("--") && value.length > 2)) throw new UsageError(`${command}: --${name} needs a value`);
        i++;
      }
      parsed.values.set(name, value);
      continue;
    }
    parsed.positionals.push(arg);
  }
  if (!parsed.help && parsed.positionals.length > maxPositionals) {
    throw new UsageError(`${command}: unexpected argument ${JSON.stringify(parsed.positionals[maxPositionals])} (try bunka ${command.split(" ")[0]} --help)`);
  }
  return parsed;
}

function clientOf(parsed: Parsed, deps: InspectDeps): SidePortClient {
  const flag = parsed.values.get("http");
  if (flag !== undefined) return new SidePortClient(sidePortUrl(flag, "--http"), deps.fetch);
  const env = deps.env.BUNKA_HTTP;
  if (env !== undefined && env.trim() !== "") return new SidePortClient(sidePortUrl(env, "BUNKA_HTTP"), deps.fetch);
  return new SidePortClient(sidePortUrl(DEFAULT_SIDE_PORT, "default"), deps.fetch);
}

/** `500`, `500ms`, `30s`, `5m`, `2h`, `1d` -> milliseconds (a bare number is milliseconds, like minAgeMs). */
export function parseDurationMs(value: string, origin: string): number {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(value.trim());
  const factor = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
  const ms = match ? Number(match[1]) * factor[(match[2] ?? "ms") as keyof typeof factor] : NaN;
  if (!Number.isSafeInteger(ms)) throw new UsageError(`${origin}: expected a duration such as 30s, 5m, 1h or milliseconds, got ${JSON.stringify(value)}`);
  return ms;
}

function parseCount(value: string, origin: string, min: number, max: number): number {
  if (!/^\d+$/.test(value.trim()) || Number(value) < min || Number(value) > max) {
    throw new UsageError(`${origin}: expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

/** Kafka's state names, matched without regard to case (`ongoing` is Ongoing). */
function parseState(value: string): string {
  const state = TRANSACTION_STATES.find((s) => s.toLowerCase() === value.trim().toLowerCase());
  if (!state) throw new UsageError(`txn list: --state must be one of ${TRANSACTION_STATES.join(", ")}, got ${JSON.stringify(value)}`);
  return state;
}

function json(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`;
}

const iso = (ms: number) => new Date(ms).toISOString();
const orDash = (value: number | string | null | undefined) => (value === null || value === undefined || value === "" ? "-" : String(value));

// ---- topics ------------------------------------------------------------------------------------

function formatConfigs(configs: Record<string, string>): string {
  const entries = Object.entries(configs);
  return entries.length === 0 ? "-" : entries.map(([k, v]) => `${k}=${v}`).join(",");
}

function topicsTable(topics: readonly TopicSummaryView[]): string {
  if (topics.length === 0) return "no topics\n";
  return renderTable(
    ["TOPIC", "PARTITIONS", "SIZE", "CONFIGS", "TOPIC ID"],
    topics.map((t) => [t.name, t.partitions, formatBytes(t.sizeBytes), formatConfigs(t.configs), t.topicId]),
    new Set([1]),
  );
}

function partitionState(p: PartitionView): string {
  if (p.failure !== null) return `failed: ${p.failure}`;
  return p.open ? "open" : "not opened yet";
}

function topicDetail(t: TopicDetailView): string {
  const head = renderFacts([
    ["Topic", t.name],
    ["Topic id", t.topicId],
    ["Partitions", t.partitions],
    ["Created", iso(t.createdMs)],
    ["Configs", formatConfigs(t.configs)],
    ["Size", formatBytes(t.sizeBytes)],
  ]);
  const table = renderTable(
    ["PARTITION", "LEADER", "LOG START", "LOG END", "HW", "LSO", "LSO LAG", "OPEN TXNS", "SEGMENTS", "SIZE", "PRODUCERS", "STATE"],
    t.partitionDetails.map((p) => [
      p.partition,
      p.leader,
      orDash(p.logStartOffset),
      orDash(p.logEndOffset),
      orDash(p.highWatermark),
      orDash(p.lastStableOffset),
      orDash(p.lsoLag),
      orDash(p.openTransactionCount),
      orDash(p.segmentCount),
      p.sizeBytes === null ? "-" : formatBytes(p.sizeBytes),
      orDash(p.producerCount),
      partitionState(p),
    ]),
    new Set([0, 1, 2, 3, 4, 5, 6, 7, 8, 10]),
  );
  return `${head}\n${table}`;
}

async function topicsCommand(args: readonly string[], deps: InspectDeps): Promise<number> {
  const parsed = parseArgs(args, ["http"], 1, "topics");
  if (parsed.help) {
    deps.stdout(topicsHelp());
    return EXIT_OK;
  }
  const client = clientOf(parsed, deps);
  const name = parsed.positionals[0];
  if (name === undefined) {
    const body = (await client.get("/v1/topics")) as { topics: TopicSummaryView[] };
    deps.stdout(parsed.json ? json(body) : topicsTable(body.topics));
  } else {
    const body = (await client.get(`/v1/topics/${encodeURIComponent(name)}`)) as TopicDetailView;
    deps.stdout(parsed.json ? json(body) : topicDetail(body));
  }
  return EXIT_OK;
}

// ---- cluster -----------------------------------------------------------------------------------

const hostPort = (hp: { host: string; port: number } | null) => (hp === null ? "-" : hp.host.includes(":") ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`);

function leaseFact(c: ClusterView): string {
  const l = c.lease;
  if (l === null) return "-";
  const validity = l.state === "valid" ? `valid for ${(l.validForMs / 1000).toFixed(1)}s` : "LAPSED";
  const error = l.lastError === null ? "" : `; last error: ${l.lastError}`;
  return `${l.id ?? "(none yet)"}, TTL ${formatMs(l.ttlMs)}, ${validity}, ${l.lapses} lapse(s) since start${error}`;
}

function clusterDetail(c: ClusterView): string {
  const facts = renderFacts([
    ["Cluster id", c.clusterId],
    ["Broker", c.brokerId],
    ["Mode", c.mode],
    ["Controller", `${c.controllerId} (the lowest live broker id)`],
    ["etcd", c.etcd === null ? "- (single mode)" : c.etcd.endpoints.join(", ")],
    ["Lease", leaseFact(c)],
  ]);
  const table = renderTable(
    ["BROKER", "KAFKA", "HTTP", "RACK", ""],
    c.members.map((m) => [m.brokerId, hostPort(m.kafka), hostPort(m.http), m.rack ?? "-", m.self ? "(this broker)" : ""]),
    new Set([0]),
  );
  return `${facts}\nMembers:\n${table}${ownershipDetail(c.ownership)}`;
}

/** Who owns how much, what nobody owns, and the moves in progress on this broker. */
function ownershipDetail(o: ClusterView["ownership"]): string {
  if (o === null) return "";
  const shares = renderTable(
    ["BROKER", "PARTITIONS", "TXN SLOTS", "GROUP SLOTS"],
    [...o.shares.map((s) => [s.brokerId, s.partitions, s.txnSlots, s.groupSlots]), ["none", o.unowned.partitions, o.unowned.txnSlots, o.unowned.groupSlots]],
    new Set([0, 1, 2, 3]),
  );
  const moving = o.held.filter((h) => h.state !== "owned");
  const moves =
    moving.length === 0
      ? "No take-over or hand-over in progress on this broker.\n"
      : `In progress on this broker:\n${renderTable(["RESOURCE", "STATE", "EPOCH"], moving.map((h) => [h.resource, h.state, h.epoch]), new Set([2]))}`;
  return `\nOwners:\n${shares}\n${moves}`;
}

async function clusterCommand(args: readonly string[], deps: InspectDeps): Promise<number> {
  const parsed = parseArgs(args, ["http"], 0, "cluster");
  if (parsed.help) {
    deps.stdout(clusterHelp());
    return EXIT_OK;
  }
  const body = (await clientOf(parsed, deps).get("/v1/cluster")) as ClusterView;
  deps.stdout(parsed.json ? json(body) : clusterDetail(body));
  return EXIT_OK;
}

// ---- transactions ------------------------------------------------------------------------------

function stateCell(t: TransactionView): string {
  return t.timedOut ? `${t.state} (timed out)` : t.state;
}

function partitionsCell(t: TransactionView): string {
  if (t.partitions.length === 0) return "-";
  const shown = t.partitions.slice(0, LIST_PARTITIONS_SHOWN).map((p) => `${p.topic}-${p.partition}`);
  const more = t.partitions.length - shown.length;
  return more > 0 ? `${shown.join(",")} +${more} more` : shown.join(",");
}

function txnTable(body: { total: number; truncated: boolean; transactions: TransactionView[] }): string {
  if (body.transactions.length === 0) return "no transactions\n";
  const table = renderTable(
    ["TRANSACTIONAL ID", "PRODUCER ID", "EPOCH", "STATE", "AGE", "TIMEOUT", "PARTITIONS", "GROUPS"],
    body.transactions.map((t) => [
      t.transactionalId,
      t.producerId,
      t.epoch,
      stateCell(t),
      t.ageMs === null ? "-" : formatDuration(t.ageMs),
      formatMs(t.timeoutMs),
      partitionsCell(t),
      t.groups.length === 0 ? "-" : t.groups.join(","),
    ]),
    new Set([1, 2]),
  );
  const note = body.truncated ? `(${body.transactions.length} of ${body.total} shown; raise --limit for more)\n` : "";
  return table + note;
}

function markerRows(markers: readonly MarkerView[]): string {
  return renderTable(
    ["RESULT", "TOPIC", "PARTITION", "TARGET BROKER", "SOURCE", "SINCE", "PRODUCER ID", "EPOCH"],
    markers.map((m) => [m.result, m.topic, m.partition, m.targetBrokerId, m.source, iso(m.sinceMs), m.producerId, m.producerEpoch]),
    new Set([2, 3, 6, 7]),
  );
}

function txnDetail(t: TransactionDetailView): string {
  const started =
    t.ongoingSinceMs === null ? "-" : t.ageMs === null ? `${iso(t.ongoingSinceMs)} (last transaction)` : `${iso(t.ongoingSinceMs)} (${formatDuration(t.ageMs)} ago)`;
  const facts = renderFacts([
    ["Transactional id", t.transactionalId],
    ["State", stateCell(t)],
    ["Producer id", t.lastProducerId >= 0 && t.lastProducerId !== t.producerId ? `${t.producerId} (previously ${t.lastProducerId})` : t.producerId],
    ["Epoch", t.epoch],
    ["Timeout", formatMs(t.timeoutMs)],
    ["Started", started],
    ["Updated", iso(t.updatedMs)],
    ["Coordinator", `broker ${t.coordinatorBrokerId}, slot ${t.slot}`],
    ["Partitions", t.partitions.length === 0 ? "-" : t.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ")],
    ["Groups", t.groups.length === 0 ? "-" : t.groups.join(", ")],
  ]);
  const staged =
    t.stagedOffsets.length === 0
      ? "Staged offsets: none\n"
      : `Staged offsets (committed with the transaction, dropped if it aborts):\n${renderTable(
          ["GROUP", "TOPIC", "PARTITION", "OFFSET", "LEADER EPOCH", "METADATA"],
          t.stagedOffsets.map((o) => [o.groupId, o.topic, o.partition, o.offset, o.leaderEpoch, o.metadata === "" ? "-" : o.metadata]),
          new Set([2, 3, 4]),
        )}`;
  const markers = t.pendingMarkers.length === 0 ? "Pending markers: none\n" : `Pending markers:\n${markerRows(t.pendingMarkers)}`;
  const hint = t.timedOut
    ? `\nThis transaction is past its timeout: the broker's reaper aborts it within 10 s. If it stays, abort it with: bunka txn abort ${printable(JSON.stringify(t.transactionalId))}\n`
    : "";
  return `${facts}\n${staged}\n${markers}${hint}`;
}

async function txnCommand(args: readonly string[], deps: InspectDeps): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined) throw new UsageError("txn: which subcommand? list, describe or abort (try bunka txn --help)");
  if (sub === "-h" || sub === "--help" || sub === "help") {
    deps.stdout(txnHelp());
    return EXIT_OK;
  }
  switch (sub) {
    case "list":
    case "ls": {
      const parsed = parseArgs(rest, ["http", "state", "min-age", "producer-id", "limit"], 0, "txn list");
      if (parsed.help) {
        deps.stdout(txnHelp());
        return EXIT_OK;
      }
      const query = new URLSearchParams();
      const state = parsed.values.get("state");
      if (state !== undefined) query.set("state", parseState(state));
      const minAge = parsed.values.get("min-age");
      if (minAge !== undefined) query.set("minAgeMs", String(parseDurationMs(minAge, "txn list: --min-age")));
      const producerId = parsed.values.get("producer-id");
      if (producerId !== undefined) query.set("producerId", String(parseCount(producerId, "txn list: --producer-id", 0, Number.MAX_SAFE_INTEGER)));
      const limit = parsed.values.get("limit");
      if (limit !== undefined) query.set("limit", String(parseCount(limit, "txn list: --limit", 1, 10_000)));
      const client = clientOf(parsed, deps);
      const qs = query.toString();
      const body = (await client.get(`/v1/transactions${qs === "" ? "" : `?${qs}`}`)) as { total: number; truncated: boolean; transactions: TransactionView[] };
      deps.stdout(parsed.json ? json(body) : txnTable(body));
      return EXIT_OK;
    }
    case "describe":
    case "show": {
      const parsed = parseArgs(rest, ["http"], 1, "txn describe");
      if (parsed.help) {
        deps.stdout(txnHelp());
        return EXIT_OK;
      }
      const id = parsed.positionals[0];
      if (id === undefined) throw new UsageError("txn describe: which transactional id? (bunka txn describe ID)");
      const body = (await clientOf(parsed, deps).get(`/v1/transactions/${encodeURIComponent(id)}`)) as TransactionDetailView;
      deps.stdout(parsed.json ? json(body) : txnDetail(body));
      return EXIT_OK;
    }
    case "abort": {
      const parsed = parseArgs(rest, ["http"], 1, "txn abort");
      if (parsed.help) {
        deps.stdout(txnHelp());
        return EXIT_OK;
      }
      const id = parsed.positionals[0];
      if (id === undefined) throw new UsageError("txn abort: which transactional id? (bunka txn abort ID)");
      const token = deps.env.BUNKA_ADMIN_TOKEN;
      if (token === undefined || token === "") {
        throw new UsageError("txn abort: set BUNKA_ADMIN_TOKEN to the broker's admin token (the side-port is read-only without it)");
      }
      const client = clientOf(parsed, deps);
      const body = (await client.post(`/v1/transactions/${encodeURIComponent(id)}/abort`, { Authorization: `Bearer ${token}` })) as {
        completed: boolean;
        transaction: TransactionView;
      };
      if (parsed.json) deps.stdout(json(body));
      else {
        const t = body.transaction;
        deps.stdout(
          body.completed
            ? `aborted ${printable(JSON.stringify(t.transactionalId))}: producer ${t.producerId} fenced at epoch ${t.epoch}, state ${t.state}\n`
            : `abort of ${printable(JSON.stringify(t.transactionalId))} decided (producer ${t.producerId} fenced at epoch ${t.epoch}, state ${t.state}); its markers are still being written, see bunka txn describe\n`,
        );
      }
      return EXIT_OK;
    }
    default:
      throw new UsageError(`txn: unknown subcommand ${JSON.stringify(sub)} (list, describe, abort; try bunka txn --help)`);
  }
}

/** Runs `bunka topics ...`, `bunka txn ...` or `bunka cluster`; one line on stderr and exit 1 or 2 for any failure. */
export async function runInspect(command: "topics" | "txn" | "cluster", args: readonly string[], deps: InspectDeps): Promise<number> {
  try {
    if (command === "cluster") return await clusterCommand(args, deps);
    return command === "topics" ? await topicsCommand(args, deps) : await txnCommand(args, deps);
  } catch (error) {
    if (error instanceof UsageError) {
      deps.stderr(`bunka: ${oneLine(error.message)}\n`);
      return EXIT_USAGE;
    }
    if (error instanceof SidePortError) {
      deps.stderr(`bunka: ${oneLine(error.message)}\n`);
      return EXIT_FAILURE;
    }
    throw error;
  }
}

function oneLine(message: string): string {
  return printable(message.split(/\r?\n/, 1)[0] ?? "");
}
