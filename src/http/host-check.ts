/**
 * The side-port's defence against DNS rebinding (docs/operations.md, "The HTTP side-port"): a web page
 * from another site can make a browser on this machine resolve its own host name to 127.0.0.1 and read
 * `/v1/*` as if it were that site, but the browser still sends the page's host name in the Host header.
 * So a request whose Host is a name this side-port does not go by is refused.
 *
 * IP literals are always accepted: rebinding needs a name an attacker controls, and an address names no
 * one. A request without a Host header (HTTP/1.0 tools) is accepted: browsers always send one.
 */

/** The host name of a Host header value (`name`, `name:port`, `[v6]:port`), lower case, no trailing dot. */
export function hostNameOf(hostHeader: string): string {
  const value = hostHeader.trim().toLowerCase();
  if (value.startsWith("[")) {
    const end = value.indexOf("]");
    return end < 0 ? value : value.slice(0, end + 1);
  }
  const colon = value.lastIndexOf(":");
  const name = colon >= 0 && value.indexOf(":") === colon ? value.slice(0, colon) : value;
  return name.endsWith(".") ? name.slice(0, -1) : name;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

function isIpLiteral(name: string): boolean {
  return IPV4.test(name) || (name.startsWith("[") && name.endsWith("]"));
}

/** Normalizes configured names the way Host headers are read. */
export function allowedHostNames(names: readonly string[]): Set<string> {
  const set = new Set<string>(["localhost"]);
  for (const name of names) {
    const normalized = hostNameOf(name);
    if (normalized !== "") set.add(normalized);
  }
  return set;
}

/** Whether a request with this Host header may be answered. */
export function hostAllowed(hostHeader: string | undefined, allowed: ReadonlySet<string>): boolean {
  if (hostHeader === undefined || hostHeader.trim() === "") return true;
  const name = hostNameOf(hostHeader);
  return isIpLiteral(name) || allowed.has(name);
}
