/**
 * The CLI's client of a running broker's HTTP side-port (docs/architecture.md, "HTTP side-port"): where it is
 * (`--http HOST:PORT`, `BUNKA_HTTP`, default 127.0.0.1:9644, the same address `bunka serve` binds by default),
 * one GET or POST with a deadline, and every way that can fail turned into one line for `bunka: <message>`.
 *
 * Two kinds of failure, because scripts treat them differently:
 * - UsageError (exit 2): what was typed is wrong (a bad address);
 * - SidePortError (exit 1): the broker could not be reached, or answered with an error (its JSON
 *   `{error, message}` is what the line says).
 * The fetch function is injected (CliDeps.fetch), so tests run without a socket.
 */

export const DEFAULT_SIDE_PORT = "127.0.0.1:9644";
export const SIDE_PORT_TIMEOUT_MS = 10_000;

export type FetchLike = (url: string, init?: RequestInit) => Promise<Response>;

/** Something the user typed is wrong: exit 2. */
export class UsageError extends Error {}

/** The broker could not be reached or refused the request: exit 1. */
export class SidePortError extends Error {
  constructor(
    message: string,
    /** The HTTP status when the broker answered, undefined when it could not be reached. */
    readonly status?: number,
    /** The broker's error code (`not_found`, `unknown_transactional_id`, ...). */
    readonly code?: string,
  ) {
    super(message);
  }
}

/**
 * The side-port's base URL from `--http` (or BUNKA_HTTP): `HOST:PORT`, `[v6]:PORT`, or a full
 * `http://` / `https://` URL. A wildcard host (what a server binds to reach every interface) means this
 * machine: 0.0.0.0 becomes 127.0.0.1 and :: becomes ::1, so that the `BUNKA_HTTP` of a server's
 * environment file also works for the CLI beside it.
 */
export function sidePortUrl(value: string, origin: string): string {
  const v = value.trim();
  if (/^https?:\/\//i.test(v)) {
    let url: URL;
    try {
      url = new URL(v);
    } catch {
      throw new UsageError(`${origin}: not a URL: ${JSON.stringify(value)}`);
    }
    return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
  }
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s[\]/]+)):(\d{1,5})$/.exec(v);
  if (!match) throw new UsageError(`${origin}: expected HOST:PORT (e.g. 127.0.0.1:9644), got ${JSON.stringify(value)}`);
  const port = Number(match[3]);
  if (port < 1 || port > 65535) throw new UsageError(`${origin}: port must be 1..65535, got ${JSON.stringify(value)}`);
  const v6 = match[1];
  const host = v6 !== undefined ? (v6 === "::" ? "::1" : v6) : match[2] === "0.0.0.0" ? "127.0.0.1" : match[2]!;
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

function describeFetchFailure(error: unknown): string {
  const e = error as { name?: string; code?: string; message?: string };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return `no answer within ${SIDE_PORT_TIMEOUT_MS / 1000} s`;
  switch (e?.code) {
    case "ECONNREFUSED":
    case "ConnectionRefused":
      return "connection refused";
    case "ENOTFOUND":
      return "host not found";
    case "ECONNRESET":
    case "ConnectionClosed":
      return "connection closed";
  }
  return (e?.message ?? String(error)).split(/\r?\n/, 1)[0]!;
}

export class SidePortClient {
  constructor(
    readonly baseUrl: string,
    private readonly fetch: FetchLike,
    private readonly timeoutMs = SIDE_PORT_TIMEOUT_MS,
  ) {}

  /** GETs `path` (already encoded) and returns its JSON body; SidePortError for anything else. */
  get(path: string): Promise<unknown> {
    return this.request("GET", path);
  }

  post(path: string, headers: Record<string, string> = {}): Promise<unknown> {
    return this.request("POST", path, headers);
  }

  private async request(method: string, path: string, headers: Record<string, string> = {}): Promise<unknown> {
    const url = `${this.baseUrl}${path}`;
    let response: Response;
    try {
      response = await this.fetch(url, { method, headers: { Accept: "application/json", ...headers }, signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (error) {
      throw new SidePortError(
        `cannot reach the broker's HTTP side-port at ${this.baseUrl} (${describeFetchFailure(error)}); is it running? (--http HOST:PORT or BUNKA_HTTP)`,
      );
    }
    const text = await response.text().catch(() => "");
    let body: unknown;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      const err = body as { error?: unknown; message?: unknown } | undefined;
      if (typeof err?.message === "string") {
        throw new SidePortError(`${err.message} (HTTP ${response.status} ${String(err.error)})`, response.status, typeof err.error === "string" ? err.error : undefined);
      }
      throw new SidePortError(`${method} ${url} answered HTTP ${response.status}; is this a bunka side-port?`, response.status);
    }
    if (body === undefined) throw new SidePortError(`${method} ${url} did not answer JSON; is this a bunka side-port?`, response.status);
    return body;
  }
}
