/**
 * Binds an HTTP app (app.ts) with Bun.serve. The only code in http/ that touches a socket; everything else
 * is tested with `app.request()`.
 *
 * - Port 0 picks a free port; `port` is the real one. A port in use is an error (no SO_REUSEPORT).
 * - Request bodies are capped small: no endpoint takes more than a bearer token and a path.
 * - `tls` (http.ssl.*, net/tls-material.ts reads the PEM files): the side-port speaks HTTPS only. Its
 *   certificate is read at start; a new one takes a restart (the Kafka listeners reload theirs).
 * - close() stops accepting, lets requests in flight finish for up to `closeTimeoutMs`, then cuts whatever
 *   is left (a browser's idle keep-alive connection must not hold up a broker's shutdown).
 */
import { listenError } from "../errors/listen-errors.ts";
import type { Logger } from "../platform/logger.ts";

export interface HttpServerOptions {
  host: string;
  port: number;
  fetch: (request: Request) => Response | Promise<Response>;
  log: Logger;
  closeTimeoutMs?: number;
  /** Bun.serve's TLS options: HTTPS on this port. */
  tls?: Bun.TLSOptions;
}

export interface HttpServer {
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

export const HTTP_MAX_REQUEST_BODY_BYTES = 64 * 1024;
export const HTTP_DEFAULT_CLOSE_TIMEOUT_MS = 5_000;

export function startHttpServer(opts: HttpServerOptions): HttpServer {
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({
      hostname: opts.host,
      port: opts.port,
      development: false,
      // Bun turns SO_REUSEPORT on by default outside development mode: a second broker started on the same
      // port would then bind too and share the traffic. A taken port must be an error, as it is for Kafka.
      reusePort: false,
      maxRequestBodySize: HTTP_MAX_REQUEST_BODY_BYTES,
      fetch: opts.fetch,
      ...(opts.tls === undefined ? {} : { tls: opts.tls }),
    });
  } catch (error) {
    // Bun's message ("Failed to start server. Is port 9644 in use?") does not say which server.
    throw listenError("the HTTP side-port", opts.host, opts.port, error);
  }
  const host = server.hostname ?? opts.host;
  const port = server.port ?? opts.port;
  opts.log.debug("http side-port bound", { host, port });

  let closing: Promise<void> | undefined;
  async function close(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceful = server.stop(false);
    const timedOut = await Promise.race([
      graceful.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), opts.closeTimeoutMs ?? HTTP_DEFAULT_CLOSE_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
    if (timedOut) {
      opts.log.warn("cutting HTTP connections that did not finish in time");
      await server.stop(true);
    }
  }
  return { host, port, close: () => (closing ??= close()) };
}
