/**
 * A local plaintext port whose every connection is carried to a TLS port (the broker's SSL listener), so
 * that the plaintext wire client and other raw test clients speak TLS without knowing it. A connection
 * whose TLS side fails (handshake refused, no client certificate, unknown CA) closes its plaintext side:
 * the client sees the broker close it.
 */
import { readFileSync } from "node:fs";

export interface TlsClientFiles {
  /** CA certificates to check the broker's certificate against. */
  caPath: string;
  /** A client certificate and its key, for listeners with ssl.client.auth. */
  certPath?: string;
  keyPath?: string;
  serverName?: string;
}

export interface TlsTunnel {
  port: number;
  /** Why TLS connections ended, in order (handshake errors, closes). */
  readonly events: string[];
  close(): void;
}

interface Pair {
  plain: Bun.Socket<Pair>;
  tls: Bun.Socket<undefined> | undefined;
  /** Bytes the client sent before the TLS side was up. */
  early: Uint8Array[];
  closed: boolean;
}

export function tlsOptions(files: TlsClientFiles): Bun.TLSOptions {
  return {
    ca: readFileSync(files.caPath, "utf8"),
    serverName: files.serverName ?? "127.0.0.1",
    ...(files.certPath === undefined ? {} : { cert: readFileSync(files.certPath, "utf8") }),
    ...(files.keyPath === undefined ? {} : { key: readFileSync(files.keyPath, "utf8") }),
  };
}

export function startTlsTunnel(targetPort: number, files: TlsClientFiles, targetHost = "127.0.0.1"): TlsTunnel {
  const events: string[] = [];
  const tls = tlsOptions(files);
  const end = (pair: Pair) => {
    if (pair.closed) return;
    pair.closed = true;
    pair.plain.end();
    pair.tls?.end();
  };
  const server = Bun.listen<Pair>({
    hostname: "127.0.0.1",
    port: 0,
    data: undefined as unknown as Pair,
    socket: {
      binaryType: "uint8array",
      open(plain) {
        const pair: Pair = { plain, tls: undefined, early: [], closed: false };
        plain.data = pair;
        Bun.connect({
          hostname: targetHost,
          port: targetPort,
          tls,
          socket: {
            binaryType: "uint8array",
            handshake(socket, success, error) {
              if (!success) {
                events.push(`handshake failed: ${error?.message}`);
                end(pair);
                return;
              }
              pair.tls = socket;
              for (const chunk of pair.early.splice(0)) socket.write(chunk);
            },
            data(_socket, chunk) {
              if (!pair.closed) pair.plain.write(chunk);
            },
            close() {
              events.push("closed");
              end(pair);
            },
            error(_socket, error) {
              events.push(`error: ${error.message}`);
              end(pair);
            },
          },
        }).catch((error: unknown) => {
          events.push(`connect failed: ${String(error)}`);
          end(pair);
        });
      },
      data(plain, chunk) {
        const pair = plain.data;
        if (pair.tls === undefined) pair.early.push(chunk.slice());
        else pair.tls.write(chunk);
      },
      close(plain) {
        const pair = plain.data;
        if (pair !== undefined) end(pair);
      },
    },
  });
  return { port: server.port, events, close: () => server.stop(true) };
}
