/**
 * `bunka topics` and `bunka txn ...` against a fake fetch: the address they use, the requests they make,
 * the tables and JSON they print, and the exit codes (2 bad usage, 1 unreachable or an error answer), all
 * through runCli as main.ts calls it. tests/e2e/binary-http.test.ts runs them in the compiled binary.
 */
import { describe, expect, test } from "bun:test";
import { type CliDeps, runCli } from "../../../src/cli/run.ts";
import { UsageError, sidePortUrl } from "../../../src/cli/side-port.ts";
import { printable, renderTable } from "../../../src/cli/table.ts";
import { parseDurationMs } from "../../../src/cli/inspect.ts";
import type { TopicDetailView, TransactionDetailView, TransactionView } from "../../../src/http/ports.ts";
import { MemoryFs } from "../../support/memory-fs.ts";

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
}

type Route = (call: Call) => Response | Promise<Response>;

function jsonResponse(value: unknown, status = 200): Response {
  return new Response(JSON.stringify(value), { status, headers: { "Content-Type": "application/json" } });
}

/** The CLI with a fake side-port: `routes` by "METHOD path?query" (path after the base URL). */
function cli(routes: Record<string, Route> = {}, env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const calls: Call[] = [];
  const deps: CliDeps = {
    env,
    readFile: () => {
      throw new Error("no files");
    },
    stdout: (t) => void out.push(t),
    stderr: (t) => void err.push(t),
    fs: new MemoryFs(),
    serve: async () => {
      throw new Error("not serving in these tests");
    },
    fetch: async (url, init) => {
      const headers = Object.fromEntries(new Headers(init?.headers).entries());
      const call = { url, method: init?.method ?? "GET", headers };
      calls.push(call);
      const { pathname, search } = new URL(url);
      const route = routes[`${call.method} ${pathname}${search}`];
      if (!route) return jsonResponse({ error: "not_found", message: `no such endpoint: ${call.method} ${pathname}` }, 404);
      return route(call);
    },
  };
  const run = async (...argv: string[]) => {
    out.length = 0;
    err.length = 0;
    calls.length = 0;
    const code = await runCli(argv, deps);
    return { code, stdout: out.join(""), stderr: err.join(""), calls: [...calls] };
  };
  return { run, deps };
}

const ongoing: TransactionView = {
  transactionalId: "orders-app-0",
  producerId: 4000,
  lastProducerId: 4000,
  epoch: 2,
  lastEpoch: -1,
  timeoutMs: 60_000,
  state: "Ongoing",
  partitions: [
    { topic: "orders", partition: 0 },
    { topic: "orders", partition: 1 },
    { topic: "payments", partition: 0 },
    { topic: "payments", partition: 1 },
  ],
  groups: ["billing"],
  ongoingSinceMs: Date.UTC(2026, 0, 2, 3, 4, 5),
  ageMs: 75_000,
  timedOut: true,
  updatedMs: Date.UTC(2026, 0, 2, 3, 4, 6),
  slot: 17,
  coordinatorBrokerId: 0,
};

const idle: TransactionView = {
  ...ongoing,
  transactionalId: "reports",
  producerId: 4001,
  epoch: 0,
  timeoutMs: 900_000,
  state: "CompleteCommit",
  partitions: [],
  groups: [],
  ageMs: null,
  timedOut: false,
  slot: 3,
};

const detail: TransactionDetailView = {
  ...ongoing,
  stagedOffsets: [{ groupId: "billing", topic: "orders", partition: 0, offset: 42, leaderEpoch: -1, metadata: "", commitTimestampMs: ongoing.updatedMs }],
  pendingMarkers: [],
  timeline: [],
};

const ordersTopic: TopicDetailView = {
  name: "orders",
  topicId: "e629f5eb-e2d6-44bb-b879-5f7312c37d63",
  partitions: 2,
  createdMs: Date.UTC(2026, 0, 1),
  configs: { "cleanup.policy": "delete" },
  sizeBytes: 2048,
  partitionDetails: [
    {
      partition: 0,
      leader: 0,
      open: true,
      logStartOffset: 0,
      logEndOffset: 12,
      highWatermark: 12,
      lastStableOffset: 9,
      segmentCount: 1,
      segmentBaseOffsets: [0],
      sizeBytes: 2048,
      producerCount: 2,
      openTransactionCount: 1,
      lsoLag: 3,
      failure: null,
      cleaner: null,
    },
    {
      partition: 1,
      leader: 0,
      open: false,
      logStartOffset: null,
      logEndOffset: null,
      highWatermark: null,
      lastStableOffset: null,
      segmentCount: null,
      segmentBaseOffsets: null,
      sizeBytes: null,
      producerCount: null,
      openTransactionCount: null,
      lsoLag: null,
      failure: null,
      cleaner: null,
    },
  ],
};

const { partitionDetails: _omit, ...ordersSummary } = ordersTopic;

describe("the side-port address", () => {
  test.each([
    ["127.0.0.1:9644", "http://127.0.0.1:9644"],
    ["localhost:1", "http://localhost:1"],
    ["[::1]:9644", "http://[::1]:9644"],
    ["0.0.0.0:9644", "http://127.0.0.1:9644"],
    ["[::]:9644", "http://[::1]:9644"],
    ["kafka-1.example.internal:9644", "http://kafka-1.example.internal:9644"],
    ["http://broker:9644/", "http://broker:9644"],
    ["https://broker.example/bunka/", "https://broker.example/bunka"],
  ])("%p -> %p", (value, url) => {
    expect(sidePortUrl(value, "--http")).toBe(url);
  });

  test.each(["9644", "host", "host:0", "host:65536", "host:port", ":9644", "a b:1", "[::1]"])("%p is a usage error", (value) => {
    expect(() => sidePortUrl(value, "--http")).toThrow(UsageError);
  });

  test("default 127.0.0.1:9644, then BUNKA_HTTP, then --http (both spellings)", async () => {
    const routes = { "GET /v1/topics": () => jsonResponse({ topics: [] }) };
    expect((await cli(routes).run("topics")).calls[0]!.url).toBe("http://127.0.0.1:9644/v1/topics");
    const env = cli(routes, { BUNKA_HTTP: "10.0.0.5:9000" });
    expect((await env.run("topics")).calls[0]!.url).toBe("http://10.0.0.5:9000/v1/topics");
    expect((await env.run("topics", "--http", "127.0.0.1:7")).calls[0]!.url).toBe("http://127.0.0.1:7/v1/topics");
    expect((await env.run("topics", "--http=[::1]:8")).calls[0]!.url).toBe("http://[::1]:8/v1/topics");
    expect((await cli(routes, { BUNKA_HTTP: "" }).run("topics")).calls[0]!.url).toBe("http://127.0.0.1:9644/v1/topics");
  });

  test("a bad address is exit 2 with one line naming where it came from, and nothing is fetched", async () => {
    const bad = await cli().run("txn", "list", "--http", "nope");
    expect(bad).toMatchObject({ code: 2, stdout: "", calls: [] });
    expect(bad.stderr).toBe('bunka: --http: expected HOST:PORT (e.g. 127.0.0.1:9644), got "nope"\n');
    const env = await cli({}, { BUNKA_HTTP: "x:99999" }).run("topics");
    expect(env.code).toBe(2);
    expect(env.stderr).toBe('bunka: BUNKA_HTTP: port must be 1..65535, got "x:99999"\n');
  });
});

describe("bunka topics", () => {
  test("a table of every topic", async () => {
    const { run } = cli({ "GET /v1/topics": () => jsonResponse({ topics: [ordersSummary, { ...ordersSummary, name: "payments-eu", partitions: 12, configs: {}, sizeBytes: 0 }] }) });
    const result = await run("topics");
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(result.stdout).toBe(
      [
        "TOPIC        PARTITIONS  SIZE     CONFIGS                TOPIC ID",
        "orders                2  2.0 KiB  cleanup.policy=delete  e629f5eb-e2d6-44bb-b879-5f7312c37d63",
        "payments-eu          12  0 B      -                      e629f5eb-e2d6-44bb-b879-5f7312c37d63",
        "",
      ].join("\n"),
    );
    expect(result.calls[0]!.headers.accept).toBe("application/json");
  });

  test("no topics, and --json prints the side-port's JSON", async () => {
    const { run } = cli({ "GET /v1/topics": () => jsonResponse({ topics: [] }) });
    expect((await run("topics")).stdout).toBe("no topics\n");
    const json = await run("topics", "--json");
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual({ topics: [] });
  });

  test("one topic: its facts and a row per partition, LSO lag included", async () => {
    const { run } = cli({ "GET /v1/topics/orders": () => jsonResponse(ordersTopic) });
    const result = await run("topics", "orders");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Topic       orders\n");
    expect(result.stdout).toContain("Created     2026-01-01T00:00:00.000Z\n");
    const table = result.stdout.split("\n\n")[1]!;
    expect(table.split("\n")).toEqual([
      "PARTITION  LEADER  LOG START  LOG END  HW  LSO  LSO LAG  OPEN TXNS  SEGMENTS  SIZE     PRODUCERS  STATE",
      "        0       0          0       12  12    9        3          1         1  2.0 KiB          2  open",
      "        1       0          -        -   -    -        -          -         -  -                -  not opened yet",
      "",
    ]);
  });

  test("an unknown topic is exit 1 with the broker's message", async () => {
    const { run } = cli({ "GET /v1/topics/nope": () => jsonResponse({ error: "unknown_topic", message: 'topic "nope" does not exist' }, 404) });
    expect(await run("topics", "nope")).toMatchObject({ code: 1, stdout: "", stderr: 'bunka: topic "nope" does not exist (HTTP 404 unknown_topic)\n' });
  });

  test("usage errors are exit 2: an unknown flag, two topics, a flag without its value", async () => {
    const { run } = cli();
    expect(await run("topics", "--verbose")).toMatchObject({ code: 2, stderr: 'bunka: topics: unknown flag "--verbose" (try bunka topics --help)\n', calls: [] });
    expect(await run("topics", "a", "b")).toMatchObject({ code: 2, stderr: 'bunka: topics: unexpected argument "b" (try bunka topics --help)\n' });
    expect(await run("topics", "--http")).toMatchObject({ code: 2, stderr: "bunka: topics: --http needs a value\n" });
  });

  test("--help prints the command's help and fetches nothing", async () => {
    const result = await cli().run("topics", "--help");
    expect(result).toMatchObject({ code: 0, calls: [] });
    expect(result.stdout).toStartWith("Usage: bunka topics [TOPIC]");
    expect(result.stdout).toContain("--http HOST:PORT");
  });
});

describe("bunka txn list", () => {
  test("a table: timed-out transactions marked, long partition lists shortened, open age and timeout humanised", async () => {
    const { run } = cli({ "GET /v1/transactions": () => jsonResponse({ total: 2, truncated: false, transactions: [ongoing, idle] }) });
    const result = await run("txn", "list");
    expect(result).toMatchObject({ code: 0, stderr: "" });
    expect(result.stdout).toBe(
      [
        "TRANSACTIONAL ID  PRODUCER ID  EPOCH  STATE                AGE     TIMEOUT  PARTITIONS                            GROUPS",
        "orders-app-0             4000      2  Ongoing (timed out)  1m 15s  1m       orders-0,orders-1,payments-0 +1 more  billing",
        "reports                  4001      0  CompleteCommit       -       15m      -                                     -",
        "",
      ].join("\n"),
    );
  });

  test("filters become the query: --state in any case, --min-age with units, --producer-id, --limit; truncation is said", async () => {
    const { run } = cli({
      "GET /v1/transactions?state=Ongoing&minAgeMs=300000&producerId=4000&limit=1": () => jsonResponse({ total: 3, truncated: true, transactions: [ongoing] }),
    });
    const result = await run("txn", "list", "--state", "ongoing", "--min-age=5m", "--producer-id", "4000", "--limit", "1");
    expect(result.code).toBe(0);
    expect(result.stdout).toEndWith("(1 of 3 shown; raise --limit for more)\n");
  });

  test("nothing to show, and --json", async () => {
    const empty = { total: 0, truncated: false, transactions: [] };
    const { run } = cli({ "GET /v1/transactions?minAgeMs=0": () => jsonResponse(empty) });
    expect((await run("txn", "list", "--min-age", "0")).stdout).toBe("no transactions\n");
    expect(JSON.parse((await run("txn", "ls", "--min-age", "0", "--json")).stdout)).toEqual(empty);
  });

  test.each([
    [["--state", "Running"], "bunka: txn list: --state must be one of Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence, got \"Running\"\n"],
    [["--min-age", "soon"], 'bunka: txn list: --min-age: expected a duration such as 30s, 5m, 1h or milliseconds, got "soon"\n'],
    [["--limit", "0"], 'bunka: txn list: --limit: expected an integer from 1 to 10000, got "0"\n'],
    [["--producer-id", "-1"], 'bunka: txn list: --producer-id: expected an integer from 0 to 9007199254740991, got "-1"\n'],
    [["--producer-id", "--json"], "bunka: txn list: --producer-id needs a value\n"],
    [["--producer-id=x"], 'bunka: txn list: --producer-id: expected an integer from 0 to 9007199254740991, got "x"\n'],
    [["extra"], 'bunka: txn list: unexpected argument "extra" (try bunka txn --help)\n'],
    [["--bogus"], 'bunka: txn list: unknown flag "--bogus" (try bunka txn --help)\n'],
  ])("%p is exit 2 with one line, nothing fetched", async (args, stderr) => {
    expect(await cli().run("txn", "list", ...args)).toMatchObject({ code: 2, stdout: "", stderr, calls: [] });
  });
});

describe("bunka txn describe", () => {
  test("facts, staged offsets, pending markers and the hint for a timed-out transaction; the id is URL-encoded", async () => {
    const { run } = cli({ "GET /v1/transactions/orders-app-0": () => jsonResponse(detail), "GET /v1/transactions/a%2Fb%20c": () => jsonResponse({ ...detail, transactionalId: "a/b c" }) });
    const result = await run("txn", "describe", "orders-app-0");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("Transactional id  orders-app-0\n");
    expect(result.stdout).toContain("State             Ongoing (timed out)\n");
    expect(result.stdout).toContain("Started           2026-01-02T03:04:05.000Z (1m 15s ago)\n");
    expect(result.stdout).toContain("Coordinator       broker 0, slot 17\n");
    expect(result.stdout).toContain("Partitions        orders-0, orders-1, payments-0, payments-1\n");
    expect(result.stdout).toContain("GROUP    TOPIC   PARTITION  OFFSET  LEADER EPOCH  METADATA\nbilling  orders          0      42            -1  -\n");
    expect(result.stdout).toContain("Pending markers: none\n");
    expect(result.stdout).toContain('abort it with: bunka txn abort "orders-app-0"');
    expect((await run("txn", "show", "a/b c")).calls[0]!.url).toBe("http://127.0.0.1:9644/v1/transactions/a%2Fb%20c");
  });

  test("control characters in an id cannot reach the terminal", async () => {
    const evil = "x\u001b[2J\ny";
    const { run } = cli({ [`GET /v1/transactions/${encodeURIComponent(evil)}`]: () => jsonResponse({ ...detail, transactionalId: evil, timedOut: false }) });
    const result = await run("txn", "describe", evil);
    expect(result.stdout).toContain("Transactional id  x\\x1b[2J\\x0ay\n");
    expect(result.stdout).not.toContain("\u001b");
  });

  test("an unknown id is exit 1 with the broker's message; a missing id is exit 2", async () => {
    const { run } = cli({
      "GET /v1/transactions/nope": () => jsonResponse({ error: "unknown_transactional_id", message: 'no transaction state for "nope"' }, 404),
    });
    expect(await run("txn", "describe", "nope")).toMatchObject({ code: 1, stderr: 'bunka: no transaction state for "nope" (HTTP 404 unknown_transactional_id)\n' });
    expect(await run("txn", "describe")).toMatchObject({ code: 2, stderr: "bunka: txn describe: which transactional id? (bunka txn describe ID)\n", calls: [] });
  });
});

describe("bunka txn abort", () => {
  test("needs BUNKA_ADMIN_TOKEN (exit 2 without), sends it as a bearer token, and prints what happened", async () => {
    const aborted = { ...ongoing, epoch: 3, state: "CompleteAbort", partitions: [], groups: [], timedOut: false, ageMs: null };
    const routes = { "POST /v1/transactions/orders-app-0/abort": () => jsonResponse({ aborted: true, completed: true, transaction: aborted }) };
    expect(await cli(routes).run("txn", "abort", "orders-app-0")).toMatchObject({
      code: 2,
      stderr: "bunka: txn abort: set BUNKA_ADMIN_TOKEN to the broker's admin token (the side-port is read-only without it)\n",
      calls: [],
    });
    const result = await cli(routes, { BUNKA_ADMIN_TOKEN: "t0k" }).run("txn", "abort", "orders-app-0");
    expect(result.code).toBe(0);
    expect(result.calls[0]).toMatchObject({ method: "POST", headers: { authorization: "Bearer t0k" } });
    expect(result.stdout).toBe('aborted "orders-app-0": producer 4000 fenced at epoch 3, state CompleteAbort\n');
  });

  test("a transaction that is not Ongoing, or a wrong token, is exit 1 with the broker's message", async () => {
    const { run } = cli(
      {
        "POST /v1/transactions/reports/abort": () =>
          jsonResponse({ error: "not_ongoing", message: 'transaction "reports" is CompleteCommit: only an Ongoing transaction can be aborted' }, 409),
        "POST /v1/transactions/x/abort": () => jsonResponse({ error: "unauthorized", message: "this endpoint needs the admin token: Authorization: Bearer <token>" }, 401),
      },
      { BUNKA_ADMIN_TOKEN: "t0k" },
    );
    expect(await run("txn", "abort", "reports")).toMatchObject({
      code: 1,
      stderr: 'bunka: transaction "reports" is CompleteCommit: only an Ongoing transaction can be aborted (HTTP 409 not_ongoing)\n',
    });
    expect((await run("txn", "abort", "x")).stderr).toBe("bunka: this endpoint needs the admin token: Authorization: Bearer <token> (HTTP 401 unauthorized)\n");
  });
});

describe("failures", () => {
  test("a broker that cannot be reached is exit 1 with one line saying where and why", async () => {
    const { run, deps } = cli();
    deps.fetch = async () => {
      throw Object.assign(new TypeError("Unable to connect. Is the computer able to access the url?"), { code: "ECONNREFUSED" });
    };
    expect(await run("txn", "list", "--http", "127.0.0.1:1")).toMatchObject({
      code: 1,
      stdout: "",
      stderr: "bunka: cannot reach the broker's HTTP side-port at http://127.0.0.1:1 (connection refused); is it running? (--http HOST:PORT or BUNKA_HTTP)\n",
    });
    deps.fetch = async () => {
      throw new DOMException("The operation timed out.", "TimeoutError");
    };
    expect((await run("topics")).stderr).toContain("(no answer within 10 s)");
  });

  test("something else on that port (not JSON, or an error without a message) is exit 1", async () => {
    const { run } = cli({
      "GET /v1/topics": () => new Response("<html>hello</html>", { headers: { "Content-Type": "text/html" } }),
      "GET /v1/transactions": () => new Response("bad gateway", { status: 502 }),
    });
    expect(await run("topics")).toMatchObject({ code: 1, stderr: "bunka: GET http://127.0.0.1:9644/v1/topics did not answer JSON; is this a bunka side-port?\n" });
    expect(await run("txn", "list")).toMatchObject({ code: 1, stderr: "bunka: GET http://127.0.0.1:9644/v1/transactions answered HTTP 502; is this a bunka side-port?\n" });
  });

  test("txn without a subcommand, or an unknown one, is exit 2", async () => {
    const { run } = cli();
    expect(await run("txn")).toMatchObject({ code: 2, stderr: "bunka: txn: which subcommand? list, describe or abort (try bunka txn --help)\n" });
    expect(await run("txn", "kill", "x")).toMatchObject({ code: 2, stderr: 'bunka: txn: unknown subcommand "kill" (list, describe, abort; try bunka txn --help)\n' });
  });
});

describe("help", () => {
  test("bunka --help lists the side-port commands; bunka help txn and bunka txn --help print the txn help", async () => {
    const { run } = cli();
    const main = (await run("--help")).stdout;
    for (const line of ["bunka topics [TOPIC]", "bunka txn list [filters]", "bunka txn describe ID", "bunka txn abort ID", "--http HOST:PORT", "BUNKA_HTTP", "--json"]) {
      expect(main).toContain(line);
    }
    const txn = await run("help", "txn");
    expect(txn.stdout).toContain("bunka txn list [--state STATE] [--min-age DURATION]");
    expect((await run("txn", "--help")).stdout).toBe(txn.stdout);
    expect((await run("txn", "list", "--help")).stdout).toBe(txn.stdout);
    expect((await run("help", "topics")).stdout).toStartWith("Usage: bunka topics");
  });
});

describe("helpers", () => {
  test("durations", () => {
    expect(parseDurationMs("250", "x")).toBe(250);
    expect(parseDurationMs("250ms", "x")).toBe(250);
    expect(parseDurationMs("30s", "x")).toBe(30_000);
    expect(parseDurationMs("5m", "x")).toBe(300_000);
    expect(parseDurationMs("2h", "x")).toBe(7_200_000);
    expect(parseDurationMs("1d", "x")).toBe(86_400_000);
    for (const bad of ["", "-1", "1.5s", "5 m", "1w"]) expect(() => parseDurationMs(bad, "x")).toThrow(UsageError);
  });

  test("tables: left-aligned text, right-aligned numbers, no trailing spaces; control characters escaped", () => {
    expect(renderTable(["A", "NUM", "LAST"], [["x", 1, "end"], ["long", 100, ""]], new Set([1]))).toBe("A     NUM  LAST\nx       1  end\nlong  100\n");
    expect(printable("a\tb\u007f")).toBe("a\\x09b\\x7f");
  });
});
