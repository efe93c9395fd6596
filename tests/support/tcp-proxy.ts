/**
 * A TCP proxy on a loopback port for tests that need to break a connection on purpose: `cut()` drops every
 * connection through it and refuses new ones (the port is closed), `resume()` listens again on the same
 * port. Used to take one etcd endpoint away from a client while etcd itself goes on. With
 * `dropResponses` set, requests still reach etcd but its answers are thrown away: a write applied whose
 * answer was lost.
 */
import type { Socket, TCPSocketListener } from "bun";

interface Pair {
  client: Socket<Pair>;
  upstream: Socket<Pair> | undefined;
  /** Bytes from the client before the upstream connection was open. */
  early: Uint8Array[];
  /** Bytes each side has not taken yet. */
  toClient: Uint8Array[];
  toUpstream: Uint8Array[];
}

function flush(socket: Socket<Pair> | undefined, queue: Uint8Array[]): void {
  if (socket === undefined) return;
  while (queue.length > 0) {
    const chunk = queue[0]!;
    const written = socket.write(chunk);
    if (written < chunk.byteLength) {
      queue[0] = chunk.subarray(Math.max(0, written));
      return;
    }
    queue.shift();
  }
}

export class TcpProxy {
  private listener: TCPSocketListener<Pair> | undefined;
  private readonly pairs = new Set<Pair>();
  readonly port: number;
  /** Forward what clients send, discard what comes back. */
  dropResponses = false;

  private constructor(
    private readonly targetPort: number,
    port: number,
  ) {
    this.port = port;
  }

  static start(targetPort: number): TcpProxy {
    const proxy = new TcpProxy(targetPort, 0);
    const listener = proxy.listen(0);
    (proxy as { port: number }).port = listener.port;
    proxy.listener = listener;
    return proxy;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Connections open through the proxy. */
  get connections(): number {
    return this.pairs.size;
  }

  /** Drops every connection and closes the port. */
  cut(): void {
    this.listener?.stop(true);
    this.listener = undefined;
    for (const pair of this.pairs) {
      pair.client.terminate();
      pair.upstream?.terminate();
    }
    this.pairs.clear();
  }

  /** Listens again on the same port. */
  resume(): void {
    if (this.listener === undefined) this.listener = this.listen(this.port);
  }

  close(): void {
    this.cut();
  }

  private listen(port: number): TCPSocketListener<Pair> {
    const targetPort = this.targetPort;
    const pairs = this.pairs;
    const proxy = this;
    return Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          const pair: Pair = { client, upstream: undefined, early: [], toClient: [], toUpstream: [] };
          client.data = pair;
          pairs.add(pair);
          void Bun.connect<Pair>({
            hostname: "127.0.0.1",
            port: targetPort,
            data: pair,
            socket: {
              open(upstream) {
                pair.upstream = upstream;
                pair.toUpstream.push(...pair.early);
                pair.early = [];
                flush(upstream, pair.toUpstream);
              },
              data(_upstream, chunk) {
                if (proxy.dropResponses) return;
                pair.toClient.push(new Uint8Array(chunk));
                flush(pair.client, pair.toClient);
              },
              drain(upstream) {
                flush(upstream, pair.toUpstream);
              },
              close() {
                pairs.delete(pair);
                pair.client.end();
              },
              error() {
                pairs.delete(pair);
                pair.client.terminate();
              },
            },
          }).catch(() => {
            pairs.delete(pair);
            client.terminate();
          });
        },
        data(client, chunk) {
          const pair = client.data;
          if (pair.upstream === undefined) pair.early.push(new Uint8Array(chunk));
          else {
            pair.toUpstream.push(new Uint8Array(chunk));
            flush(pair.upstream, pair.toUpstream);
          }
        },
        drain(client) {
          flush(client, client.data.toClient);
        },
        close(client) {
          pairs.delete(client.data);
          client.data.upstream?.end();
        },
        error(client) {
          pairs.delete(client.data);
          client.data.upstream?.terminate();
        },
      },
    });
  }
}
