/**
 * The HTTP side-port (docs/architecture.md, "HTTP side-port") as a Hono app factory over read-only query ports
 * (ports.ts). No socket here: server.ts binds it with Bun.serve, tests call `app.request()`.
 *
 * Routes:
 *   GET  /                                   live dashboard (HTML; its script keeps it current, dashboard.ts)
 *   GET  /dashboard/transactions/:id         one transactional id's page with its timeline
 *   GET  /dashboard/events                   server-sent events: the main page's changed sections every second
 *                                            (?transaction=<id>: that id's page)
 *   GET  /dashboard.js, /dashboard.css       the pages' script and stylesheet (dashboard-assets.ts)
 *   GET  /favicon.ico                        204: there is no icon
 *   GET  /health                             the process is alive: 200 {status: "ok"}
 *   GET  /ready                              200 {status: "ready"}, 200 {status: "degraded", message} (serving,
 *                                            but partitions with damaged data are not), or 503 {error, message}
 *   GET  /metrics                            Prometheus text exposition 0.0.4
 *   GET  /v1/cluster                         cluster id, brokers, controller, features, counts
 *   GET  /v1/topics                          every topic, summarised
 *   GET  /v1/topics/:topic                   one topic with each partition's offsets, segments and size
 *   GET  /v1/producers/:topic/:partition     the partition's dedupe windows (?limit=, ?producerId=)
 *   GET  /v1/transactions                    coordinator entries (?state=, ?minAgeMs=, ?producerId=, ?limit=)
 *   GET  /v1/transactions/:transactionalId   one entry, its staged offsets and its pending markers
 *   GET  /v1/markers                         markers decided and not yet durable, queue depths (?limit=)
 *   GET  /v1/groups                          consumer groups: members, state, committed offsets and lags (?limit=)
 *   GET  /v1/samples                         the live dashboard's history: one sample a second, five minutes
 *   POST /v1/transactions/:transactionalId/abort   only with an admin token configured; Bearer auth
 *
 * With `readsNeedToken` (http.reads.need.token) every route but /health and /ready needs the admin token
 * too, as `Authorization: Bearer <token>` or as the password of Basic auth (any user name), so that a
 * browser can open the dashboard: a 401 offers both.
 *
 * Conventions:
 * - Bodies are JSON unless the request's Accept header names application/msgpack (or
 *   application/x-msgpack): then the same value is MessagePack. Responses say `Vary: Accept`.
 * - Errors are always JSON `{error, message}` (even when MessagePack was asked for: an error must be
 *   readable by any tool), with `error` a stable snake_case code and the right status: 400 for a malformed
 *   parameter, 401 for a missing or wrong admin token, 404 for an unknown route, topic or partition, 405 for
 *   a known route with another method (with `Allow`), 501 for a subsystem that does not exist yet, 503 for
 *   not ready, 500 for a bug.
 * - Absent subsystems answer 501, not an empty list: "no hanging transactions" and "transactions are not
 *   implemented" must never look the same to a script.
 * - A request whose Host header names a host the side-port does not go by is 403 `host_not_allowed`
 *   (host-check.ts: DNS rebinding), before any route.
 * - Write routes exist only when an admin token is configured; without one they are 404 like any unknown
 *   route, so a read-only side-port reveals nothing about them.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { encode as encodeMsgpack } from "@msgpack/msgpack";
import { Hono, type Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { streamSSE } from "hono/streaming";
import { DASHBOARD_SCRIPT, DASHBOARD_STYLE } from "./dashboard-assets.ts";
import { dashboardSections, renderDashboard, renderTransactionPage, transactionSections, type DashboardSection } from "./dashboard.ts";
import { allowedHostNames, hostAllowed } from "./host-check.ts";
import { type HttpQueryPorts, TRANSACTION_STATES, type TransactionStateName } from "./ports.ts";

export interface HttpAppOptions {
  /** Enables the write routes, which then require `Authorization: Bearer <token>`. */
  adminToken?: string;
  /** Every route but /health and /ready needs the admin token too (http.reads.need.token; needs `adminToken`). */
  readsNeedToken?: boolean;
  /** Told about an unexpected error (a bug) before the 500 answer; main.ts logs it. */
  onError?: (error: unknown, method: string, path: string) => void;
  /** Seconds between dashboard reloads when the page's script cannot run (no JavaScript); default 5. */
  dashboardRefreshSeconds?: number;
  /**
   * Host names the side-port goes by (its own host, the machine's name, `http.allowed.hosts`); a request
   * whose Host header names another is answered 403 (host-check.ts). "localhost" and IP literals always pass.
   */
  allowedHostNames?: readonly string[];
}

/** Query limits: a default that keeps answers small and a bound that keeps them sane. */
export const DEFAULT_LIST_LIMIT = 1000;
export const MAX_LIST_LIMIT = 10_000;
const INT32_MAX = 2_147_483_647;

export const MSGPACK_MEDIA_TYPES = ["application/msgpack", "application/x-msgpack"] as const;

/** A bad request parameter, answered 400 by the error handler. */
class BadRequest extends Error {}

function errorBody(c: Context, status: ContentfulStatusCode, error: string, message: string, headers?: Record<string, string>) {
  return c.json({ error, message }, status, { "Vary": "Accept", ...headers });
}

/**
 * True when the Accept header asks for MessagePack: a MessagePack media type with a non-zero quality, at
 * least as high as application/json's if that is listed too. Wildcards do not count: they mean "anything",
 * and JSON is the default.
 */
export function wantsMsgpack(accept: string | undefined): boolean {
  if (!accept) return false;
  let msgpackQ = 0;
  let jsonQ = 0;
  for (const part of accept.split(",")) {
    const [rawType, ...params] = part.trim().toLowerCase().split(";");
    const type = rawType!.trim();
    const qParam = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    const parsed = qParam === undefined ? 1 : Number(qParam.slice(2));
    const q = Number.isFinite(parsed) ? parsed : 0;
    if ((MSGPACK_MEDIA_TYPES as readonly string[]).includes(type)) msgpackQ = Math.max(msgpackQ, q);
    else if (type === "application/json") jsonQ = Math.max(jsonQ, q);
  }
  return msgpackQ > 0 && msgpackQ >= jsonQ;
}

function body(c: Context, value: unknown, status: ContentfulStatusCode = 200) {
  if (wantsMsgpack(c.req.header("accept"))) {
    const bytes = encodeMsgpack(value);
    return c.body(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, status, {
      "Content-Type": "application/msgpack",
      "Vary": "Accept",
    });
  }
  return c.json(value, status, { "Vary": "Accept" });
}

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIST_LIMIT;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > MAX_LIST_LIMIT) {
    throw new BadRequest(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

function parseNonNegative(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new BadRequest(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

function parseState(raw: string | undefined): TransactionStateName | undefined {
  if (raw === undefined) return undefined;
  const state = TRANSACTION_STATES.find((s) => s === raw);
  if (!state) throw new BadRequest(`state must be one of ${TRANSACTION_STATES.join(", ")}, got ${JSON.stringify(raw)}`);
  return state;
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/** Constant-time comparison of the presented bearer token with the configured one. */
function tokenMatches(header: string | undefined, expectedDigest: Buffer): boolean {
  const match = header?.match(/^Bearer\s+(\S+)\s*$/i);
  if (!match) return false;
  return timingSafeEqual(digest(match[1]!), expectedDigest);
}

/** The same for a read: a bearer token, or the token as the password of Basic auth (what a browser sends). */
function readTokenMatches(header: string | undefined, expectedDigest: Buffer): boolean {
  if (tokenMatches(header, expectedDigest)) return true;
  const match = header?.match(/^Basic\s+([A-Za-z0-9+/=]+)\s*$/i);
  if (!match) return false;
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon >= 0 && timingSafeEqual(digest(decoded.slice(colon + 1)), expectedDigest);
}

/** Routes a load balancer or a supervisor probes: open even when reads need the token. */
const PROBE_PATHS = new Set(["/health", "/ready"]);

/**
 * The dashboard pages' policy: nothing but this origin's script, stylesheet and event stream (no inline
 * script or style, no eval, no frames, no forms, no other origin). SVG presentation attributes are not
 * styles, so the charts draw under it.
 */
export const DASHBOARD_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const NOT_IMPLEMENTED = {
  transactions: "this build has no transaction coordinator: it serves idempotent producers only, and holds no transactions",
  markers: "this build has no transaction coordinator: there are no transaction marker queues to show",
  groups: "this build has no group coordinator: there are no consumer groups to show",
  live: "this side-port keeps no live samples (the sampler is not running)",
} as const;

/** Samples without a change after which the event stream writes a comment, well within Bun's idle timeout. */
const SSE_IDLE_ROUNDS_MAX = 4;

/**
 * The dashboard's event stream: the page's sections at once, then every one that changed after each live
 * sample, as `sections` events (a JSON object of element id to HTML); `end` when the feed stops
 * (shutdown), and the stream closes. Samples that come while a write is not taken yet make one more round
 * once it is (what changed meanwhile, together), so a client that does not read holds one update, not a
 * queue.
 */
function dashboardEvents(c: Context, ports: HttpQueryPorts, render: () => Promise<DashboardSection[] | undefined>) {
  const live = ports.live;
  return streamSSE(c, async (stream) => {
    const sent = new Map<string, string>();
    let writing = false;
    let idleRounds = 0;
    /** A sample came while a write was in flight: one more round once it is taken. */
    let again = false;
    const push = async (): Promise<boolean> => {
      if (writing) {
        again = true;
        return true;
      }
      writing = true;
      try {
        do {
          again = false;
          if (stream.aborted || stream.closed) return true;
          const sections = await render();
          if (sections === undefined) return false;
          const changed: Record<string, string> = {};
          let any = false;
          for (const s of sections) {
            if (sent.get(s.id) === s.html) continue;
            sent.set(s.id, s.html);
            changed[s.id] = s.html;
            any = true;
          }
          if (any) {
            idleRounds = 0;
            await stream.writeSSE({ event: "sections", data: JSON.stringify(changed) });
          } else if (++idleRounds >= SSE_IDLE_ROUNDS_MAX) {
            // A comment line, which EventSource ignores: without a write the server's idle timeout (10 s)
            // would close a page whose sections did not change, and the page would reconnect.
            idleRounds = 0;
            await stream.write(": nothing changed\n\n");
          }
        } while (again);
        return true;
      } finally {
        writing = false;
      }
    };
    await new Promise<void>((resolve) => {
      let unsubscribe: (() => void) | undefined;
      const finish = () => {
        unsubscribe?.();
        resolve();
      };
      stream.onAbort(finish);
      unsubscribe = live?.subscribe(
        () => void push().then((going) => (going ? undefined : finish()), finish),
        () => void stream.writeSSE({ event: "end", data: "stopping" }).then(finish, finish),
      );
      void push().then((going) => {
        // Without a feed (or when it stopped or is full) the first update is the only one.
        if (!going || unsubscribe === undefined) finish();
      }, finish);
    });
  });
}

export function createHttpApp(ports: HttpQueryPorts, opts: HttpAppOptions = {}): Hono {
  const app = new Hono();
  const hostNames = allowedHostNames(opts.allowedHostNames ?? []);
  app.use(async (c, next) => {
    const host = c.req.header("host");
    if (!hostAllowed(host, hostNames)) {
      return errorBody(
        c,
        403,
        "host_not_allowed",
        `this side-port does not go by the name in the Host header (${JSON.stringify(host)}); if clients reach it by that name, add it to http.allowed.hosts (BUNKA_HTTP_ALLOWED_HOSTS)`,
      );
    }
    await next();
  });
  if (opts.readsNeedToken === true) {
    if (opts.adminToken === undefined || opts.adminToken === "") throw new TypeError("readsNeedToken needs an admin token");
    const expected = digest(opts.adminToken);
    app.use(async (c, next) => {
      if (!PROBE_PATHS.has(c.req.path) && !readTokenMatches(c.req.header("authorization"), expected)) {
        return errorBody(c, 401, "unauthorized", "this side-port needs the admin token for reads: Authorization: Bearer <token>, or the token as the password of Basic auth", {
          "WWW-Authenticate": 'Basic realm="bunka", Bearer realm="bunka"',
        });
      }
      await next();
    });
  }
  const allowed = new Map<string, string>();
  const route = <P extends string>(method: "GET" | "POST", path: P): P => {
    allowed.set(path, method === "GET" ? "GET, HEAD" : method);
    return path;
  };

  const dashboardOptions = { refreshSeconds: opts.dashboardRefreshSeconds ?? 5 };
  const pageHeaders = { "Content-Security-Policy": DASHBOARD_CSP, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" };

  app.get(route("GET", "/"), async (c) => c.html(await renderDashboard(ports, dashboardOptions), 200, pageHeaders));

  app.get(route("GET", "/dashboard/transactions/:transactionalId"), async (c) => {
    const transactionalId = c.req.param("transactionalId");
    if (!ports.transactions) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.transactions);
    const html = await renderTransactionPage(ports, transactionalId, dashboardOptions);
    if (html === undefined) return errorBody(c, 404, "unknown_transactional_id", `no transaction state for ${JSON.stringify(transactionalId)}`);
    return c.html(html, 200, pageHeaders);
  });

  app.get(route("GET", "/dashboard/events"), async (c) => {
    const transactionalId = c.req.query("transaction");
    if (transactionalId !== undefined && !ports.transactions) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.transactions);
    if (transactionalId !== undefined && (await ports.transactions!.get(transactionalId)) === undefined) {
      return errorBody(c, 404, "unknown_transactional_id", `no transaction state for ${JSON.stringify(transactionalId)}`);
    }
    c.header("Cache-Control", "no-store");
    return dashboardEvents(c, ports, transactionalId === undefined ? () => dashboardSections(ports) : () => transactionSections(ports, transactionalId));
  });

  // The assets are constants of the binary: cacheable for a while, never stale across a restart for long.
  app.get(route("GET", "/dashboard.js"), (c) =>
    c.body(DASHBOARD_SCRIPT, 200, { "Content-Type": "text/javascript; charset=utf-8", "Cache-Control": "max-age=60", "X-Content-Type-Options": "nosniff" }),
  );
  // Browsers ask for an icon with every page: none, without a 404 in their consoles.
  app.get(route("GET", "/favicon.ico"), (c) => c.body(null, 204, { "Cache-Control": "max-age=86400" }));
  app.get(route("GET", "/dashboard.css"), (c) =>
    c.body(DASHBOARD_STYLE, 200, { "Content-Type": "text/css; charset=utf-8", "Cache-Control": "max-age=60", "X-Content-Type-Options": "nosniff" }),
  );

  app.get(route("GET", "/health"), (c) => body(c, { status: "ok" }));

  app.get(route("GET", "/ready"), async (c) => {
    const readiness = await ports.readiness();
    if (readiness.ready) return body(c, readiness.degraded === undefined ? { status: "ready" } : { status: "degraded", message: readiness.degraded });
    return errorBody(c, 503, "not_ready", readiness.reason);
  });

  app.get(route("GET", "/metrics"), async (c) => {
    return c.text(await ports.metrics(), 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" });
  });

  app.get(route("GET", "/v1/cluster"), (c) => body(c, ports.cluster()));

  app.get(route("GET", "/v1/topics"), async (c) => body(c, { topics: await ports.topics() }));

  app.get(route("GET", "/v1/topics/:topic"), async (c) => {
    const name = c.req.param("topic");
    const topic = await ports.topic(name);
    if (!topic) return errorBody(c, 404, "unknown_topic", `topic ${JSON.stringify(name)} does not exist`);
    return body(c, topic);
  });

  app.get(route("GET", "/v1/producers/:topic/:partition"), async (c) => {
    const topic = c.req.param("topic");
    const rawPartition = c.req.param("partition");
    if (!/^\d+$/.test(rawPartition) || Number(rawPartition) > INT32_MAX) {
      return errorBody(c, 400, "invalid_partition", `partition must be an integer from 0 to ${INT32_MAX}, got ${JSON.stringify(rawPartition)}`);
    }
    const partition = Number(rawPartition);
    const limit = parseLimit(c.req.query("limit"));
    const producerId = parseNonNegative("producerId", c.req.query("producerId"));
    const lookup = await ports.producers(topic, partition, producerId === undefined ? { limit } : { limit, producerId });
    switch (lookup.kind) {
      case "unknown-topic":
        return errorBody(c, 404, "unknown_topic", `topic ${JSON.stringify(topic)} does not exist`);
      case "unknown-partition":
        return errorBody(
          c,
          404,
          "unknown_partition",
          `topic ${JSON.stringify(topic)} has ${lookup.partitions} partition(s), so partition ${partition} does not exist`,
        );
      case "ok":
        return body(c, lookup.view);
    }
  });

  app.get(route("GET", "/v1/transactions"), async (c) => {
    // Parameters are checked even without a coordinator, so that a bad script fails the same way on every
    // build.
    const state = parseState(c.req.query("state"));
    const minAgeMs = parseNonNegative("minAgeMs", c.req.query("minAgeMs"));
    const producerId = parseNonNegative("producerId", c.req.query("producerId"));
    const limit = parseLimit(c.req.query("limit"));
    if (!ports.transactions) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.transactions);
    const filter = {
      limit,
      ...(state === undefined ? {} : { state }),
      ...(minAgeMs === undefined ? {} : { minAgeMs }),
      ...(producerId === undefined ? {} : { producerId }),
    };
    const { total, transactions } = await ports.transactions.list(filter);
    return body(c, { total, truncated: total > transactions.length, transactions });
  });

  app.get(route("GET", "/v1/transactions/:transactionalId"), async (c) => {
    const transactionalId = c.req.param("transactionalId");
    if (!ports.transactions) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.transactions);
    const txn = await ports.transactions.get(transactionalId);
    if (!txn) return errorBody(c, 404, "unknown_transactional_id", `no transaction state for ${JSON.stringify(transactionalId)}`);
    return body(c, txn);
  });

  app.get(route("GET", "/v1/markers"), async (c) => {
    const limit = parseLimit(c.req.query("limit"));
    if (!ports.markers) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.markers);
    const { total, markers, queues } = await ports.markers.pending(limit);
    return body(c, { total, truncated: total > markers.length, markers, queues });
  });

  app.get(route("GET", "/v1/groups"), async (c) => {
    const limit = parseLimit(c.req.query("limit"));
    if (!ports.groups) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.groups);
    const { total, groups } = await ports.groups(limit);
    return body(c, { total, truncated: total > groups.length, groups });
  });

  app.get(route("GET", "/v1/samples"), (c) => {
    if (!ports.live) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.live);
    return body(c, { intervalMs: ports.live.intervalMs, windowMs: ports.live.windowMs, samples: ports.live.samples() });
  });

  if (opts.adminToken !== undefined && opts.adminToken !== "") {
    const expected = digest(opts.adminToken);
    app.post(route("POST", "/v1/transactions/:transactionalId/abort"), async (c) => {
      if (!tokenMatches(c.req.header("authorization"), expected)) {
        return errorBody(c, 401, "unauthorized", "this endpoint needs the admin token: Authorization: Bearer <token>", {
          "WWW-Authenticate": 'Bearer realm="bunka"',
        });
      }
      const transactionalId = c.req.param("transactionalId");
      if (!ports.transactionAdmin) return errorBody(c, 501, "not_implemented", NOT_IMPLEMENTED.transactions);
      const outcome = await ports.transactionAdmin.abort(transactionalId);
      if (!outcome.ok) return errorBody(c, outcome.status, outcome.error, outcome.message);
      return body(c, outcome.body);
    });
  }

  // A known path with another method: 405 and what is allowed. Registered after every real handler, so
  // those win for their own methods (HEAD is answered by the GET handler without a body).
  for (const [path, allow] of allowed) {
    app.all(path, (c) => errorBody(c, 405, "method_not_allowed", `${c.req.method} is not allowed on ${path}; use ${allow}`, { Allow: allow }));
  }

  app.notFound((c) => errorBody(c, 404, "not_found", `no such endpoint: ${c.req.method} ${c.req.path}`));

  app.onError((error, c) => {
    if (error instanceof BadRequest) return errorBody(c, 400, "bad_request", error.message);
    opts.onError?.(error, c.req.method, c.req.path);
    return errorBody(c, 500, "internal_error", error instanceof Error ? error.message : String(error));
  });

  return app;
}
