import { listenError } from "../errors/listen-errors.ts";

/**
 * Binds host:port and lets it go at once, so that a taken port is reported before a long recovery rather
 * than after it. Port 0 (any free port) cannot be taken and is not checked. A port taken between this
 * check and the real bind is still reported by the real bind, in the same words.
 */
export function checkCanListen(what: string, host: string, port: number): void {
  if (port === 0) return;
  let probe: Bun.TCPSocketListener<undefined>;
  try {
    probe = Bun.listen<undefined>({ hostname: host, port, socket: { data() {} } });
  } catch (error) {
    throw listenError(what, host, port, error);
  }
  probe.stop(true);
}
