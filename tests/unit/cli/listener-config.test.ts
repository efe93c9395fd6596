/**
 * listeners, advertised.listeners, listener.security.protocol.map, inter.broker.listener.name and the
 * ssl.* keys: parsed from the config file, checked together, resolved into the listeners to bind. Every
 * mistake is a one-line ConfigError naming the key.
 */
import { describe, expect, test } from "bun:test";
import { defaultBrokerConfig } from "../../../src/broker/config.ts";
import { interBrokerListener, resolveListeners } from "../../../src/broker/listener-config.ts";
import { parseServeArgs } from "../../../src/cli/config.ts";
import { ConfigError } from "../../../src/errors/errors.ts";

const FILE = "/etc/bunka.properties";
const withFile = (text: string, argv: string[] = []) =>
  parseServeArgs(["--config", FILE, ...argv], {}, (path) => {
    if (path !== FILE) throw new Error(`ENOENT ${path}`);
    return text;
  });
const lines = (...entries: string[]) => entries.join("\n");

function configError(fn: () => unknown): string {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  const message = (caught as ConfigError).message;
  expect(message).not.toContain("\n");
  return message;
}

describe("without listener keys", () => {
  test("one PLAINTEXT listener named PLAINTEXT at listen, advertised as advertised.listener", () => {
    const config = parseServeArgs(["--listen", "127.0.0.1:9100", "--advertised-listener", "kafka.example:19100"], {}, () => "");
    expect(config.listeners).toBeUndefined();
    expect(resolveListeners(config)).toEqual([
      { name: "PLAINTEXT", securityProtocol: "PLAINTEXT", host: "127.0.0.1", port: 9100, advertisedHost: "kafka.example", advertisedPort: 19100, tls: undefined },
    ]);
  });

  test("the defaults resolve to today's listener", () => {
    expect(resolveListeners(defaultBrokerConfig())).toEqual([
      { name: "PLAINTEXT", securityProtocol: "PLAINTEXT", host: "127.0.0.1", port: 9092, advertisedHost: undefined, advertisedPort: undefined, tls: undefined },
    ]);
  });
});

describe("listeners", () => {
  test("several listeners, names upper-cased, an empty host binds every interface, Apache's default map", () => {
    const config = withFile(
      lines(
        "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,client://:9094,SASL_PLAINTEXT://[::1]:9095",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENT:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.location=/etc/bunka/server.pem",
      ),
    );
    const resolved = resolveListeners(config);
    expect(resolved.map((l) => [l.name, l.securityProtocol, l.host, l.port])).toEqual([
      ["PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092],
      ["SSL", "SSL", "127.0.0.1", 9093],
      ["CLIENT", "SASL_SSL", "0.0.0.0", 9094],
      ["SASL_PLAINTEXT", "SASL_PLAINTEXT", "::1", 9095],
    ]);
    expect(resolved[0]!.tls).toBeUndefined();
    expect(resolved[1]!.tls).toMatchObject({ keystoreLocation: "/etc/bunka/server.pem", clientAuth: "none", keyPassword: undefined });
    expect(resolved[2]!.tls).toMatchObject({ keystoreLocation: "/etc/bunka/server.pem" });
  });

  test("Apache's default map covers the four protocol names", () => {
    const config = withFile("listeners=SASL_SSL://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2\nssl.keystore.location=/k.pem");
    expect(resolveListeners(config).map((l) => l.securityProtocol)).toEqual(["SASL_SSL", "SASL_PLAINTEXT"]);
  });

  test("port 0 may repeat (each picks its own free port)", () => {
    expect(resolveListeners(withFile("listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0")).map((l) => l.port)).toEqual([0, 0]);
  });

  test("bad entries name the key", () => {
    expect(configError(() => withFile("listeners=127.0.0.1:9092"))).toContain("(listeners): expected NAME://HOST:PORT");
    expect(configError(() => withFile("listeners=PLAIN TEXT://127.0.0.1:9092"))).toContain("bad listener name");
    expect(configError(() => withFile("listeners=PLAINTEXT://127.0.0.1:70000"))).toContain("port 70000 is out of range");
    expect(configError(() => withFile("listeners="))).toContain("listeners");
  });

  test("duplicate names", () => {
    const message = configError(() => withFile("listeners=PLAINTEXT://127.0.0.1:9092,plaintext://127.0.0.1:9093"));
    expect(message).toBe("listeners: each listener must have a different name, PLAINTEXT appears twice");
  });

  test("two listeners on one port", () => {
    const message = configError(() => withFile("listeners=PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9092\nssl.keystore.location=/k.pem"));
    expect(message).toBe("listeners: each listener must have a different port, 9092 is used by PLAINTEXT and SSL");
  });

  test("a listener name missing from the map", () => {
    expect(configError(() => withFile("listeners=CLIENT://127.0.0.1:9094"))).toBe(
      "listener.security.protocol.map (Apache's default): no security protocol for listener CLIENT (named in listeners)",
    );
    // An explicit map replaces the default, as in Apache.
    expect(configError(() => withFile("listeners=PLAINTEXT://127.0.0.1:9092,CLIENT://127.0.0.1:9094\nlistener.security.protocol.map=CLIENT:PLAINTEXT"))).toBe(
      "listener.security.protocol.map: no security protocol for listener PLAINTEXT (named in listeners)",
    );
    // Without listeners, the one listener is PLAINTEXT and the map must name it.
    expect(configError(() => withFile("listener.security.protocol.map=CLIENT:PLAINTEXT"))).toContain("no security protocol for listener PLAINTEXT (named in listen)");
  });

  test("an unknown protocol in the map", () => {
    const message = configError(() => withFile("listeners=CLIENT://127.0.0.1:9094\nlistener.security.protocol.map=CLIENT:TLS"));
    expect(message).toContain("listener.security.protocol.map): unknown security protocol \"TLS\" for listener CLIENT (expected PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL)");
    expect(configError(() => withFile("listener.security.protocol.map=CLIENT"))).toContain("expected NAME:PROTOCOL");
    expect(configError(() => withFile("listener.security.protocol.map=A:SSL,a:SSL"))).toContain("listener A is mapped twice");
  });

  test("with listeners, --listen and --advertised-listener set the PLAINTEXT listener; without one they are refused", () => {
    const config = withFile("listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093\nssl.keystore.location=/k.pem", [
      "--listen",
      "0.0.0.0:19092",
      "--advertised-listener",
      "kafka.example:29092",
    ]);
    expect(resolveListeners(config).map((l) => [l.name, l.host, l.port, l.advertisedHost, l.advertisedPort])).toEqual([
      ["PLAINTEXT", "0.0.0.0", 19092, "kafka.example", 29092],
      ["SSL", "127.0.0.1", 9093, undefined, undefined],
    ]);
    // The default listen (no flag, no key) leaves listeners as they are.
    expect(resolveListeners(withFile("listeners=PLAINTEXT://127.0.0.1:9092")).map((l) => l.port)).toEqual([9092]);
    expect(configError(() => withFile("listeners=SSL://127.0.0.1:9093\nssl.keystore.location=/k.pem", ["--listen", "127.0.0.1:9092"]))).toBe(
      "listen: it sets the listener named PLAINTEXT, and listeners has none (SSL); name every address in listeners instead",
    );
    expect(configError(() => withFile("listeners=SSL://127.0.0.1:9093\nssl.keystore.location=/k.pem", ["--advertised-listener", "a.example:9093"]))).toContain(
      "advertised.listener: it advertises the listener named PLAINTEXT, and listeners has none (SSL)",
    );
    // --listen onto a port another listener has is the same port clash.
    expect(configError(() => withFile("listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093\nssl.keystore.location=/k.pem", ["--listen", "127.0.0.1:9093"]))).toBe(
      "listeners: each listener must have a different port, 9093 is used by PLAINTEXT and SSL",
    );
  });
});

describe("advertised.listeners", () => {
  const base = "listeners=PLAINTEXT://:9092,SSL://:9093\nssl.keystore.location=/k.pem\n";

  test("per listener; one not advertised keeps its bound address", () => {
    const resolved = resolveListeners(withFile(base + "advertised.listeners=SSL://kafka.example:19093"));
    expect(resolved.map((l) => [l.name, l.advertisedHost, l.advertisedPort])).toEqual([
      ["PLAINTEXT", undefined, undefined],
      ["SSL", "kafka.example", 19093],
    ]);
  });

  test("a name that is not a listener, a wildcard host, a repeated name, no listeners", () => {
    expect(configError(() => withFile(base + "advertised.listeners=CLIENT://kafka.example:1"))).toBe(
      "advertised.listeners: CLIENT is not a listener (listeners has PLAINTEXT, SSL)",
    );
    expect(configError(() => withFile(base + "advertised.listeners=SSL://0.0.0.0:9093"))).toContain("must name a host clients can connect to");
    expect(configError(() => withFile(base + "advertised.listeners=SSL://:9093"))).toContain("must name a host clients can connect to");
    expect(configError(() => withFile(base + "advertised.listeners=SSL://a.example:1,SSL://b.example:2"))).toContain("SSL appears twice");
    expect(configError(() => withFile(base + "advertised.listeners=SSL://a.example:0"))).toContain("port 0 is out of range (1..65535)");
    expect(configError(() => withFile("advertised.listeners=PLAINTEXT://a.example:1"))).toContain("advertised.listeners: needs listeners");
  });
});

describe("inter.broker.listener.name", () => {
  test("must be a listener; defaults to PLAINTEXT, else the first", () => {
    const base = "listeners=SSL://127.0.0.1:9093,INTERNAL://127.0.0.1:9094\nlistener.security.protocol.map=SSL:SSL,INTERNAL:PLAINTEXT\nssl.keystore.location=/k.pem\n";
    expect(configError(() => withFile(base + "inter.broker.listener.name=REPLICATION"))).toBe(
      "inter.broker.listener.name: REPLICATION is not a listener (listeners has SSL, INTERNAL)",
    );
    const config = withFile(base + "inter.broker.listener.name=internal");
    expect(interBrokerListener(resolveListeners(config), config, true).name).toBe("INTERNAL");
    const noName = withFile(base);
    expect(interBrokerListener(resolveListeners(noName), noName, false).name).toBe("SSL");
  });

  test("in cluster mode it must be PLAINTEXT: brokers reach each other over PLAINTEXT", () => {
    const text = "listeners=SSL://127.0.0.1:9093\nssl.keystore.location=/k.pem\netcd.endpoints=http://127.0.0.1:2379";
    expect(configError(() => withFile(text))).toContain("in cluster mode the inter-broker listener (SSL) must be PLAINTEXT");
  });
});

describe("ssl.*", () => {
  const ssl = "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,INTERNAL://127.0.0.1:9094\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL\n";

  test("broker-wide settings, overridden per listener by listener.name.<name>.ssl.*", () => {
    const config = withFile(
      ssl +
        lines(
          "ssl.keystore.type=PEM",
          "ssl.truststore.type=pem",
          "ssl.keystore.location=/etc/bunka/server.pem",
          "ssl.key.password=secret",
          "ssl.truststore.location=/etc/bunka/ca.pem",
          "ssl.client.auth=REQUIRED",
          "listener.name.internal.ssl.keystore.location=/etc/bunka/internal.pem",
          "listener.name.internal.ssl.client.auth=none",
        ),
    );
    const [plain, external, internal] = resolveListeners(config);
    expect(plain!.tls).toBeUndefined();
    expect(external!.tls).toEqual({
      keystoreLocation: "/etc/bunka/server.pem",
      keyPassword: "secret",
      truststoreLocation: "/etc/bunka/ca.pem",
      clientAuth: "required",
      keystoreKey: "ssl.keystore.location",
      truststoreKey: "ssl.truststore.location",
    });
    expect(internal!.tls).toMatchObject({ keystoreLocation: "/etc/bunka/internal.pem", clientAuth: "none", keystoreKey: "listener.name.internal.ssl.keystore.location" });
  });

  test("a TLS listener without a keystore, client auth without a truststore", () => {
    expect(configError(() => withFile(ssl))).toContain("ssl.keystore.location: listener SSL is SSL and needs a PEM keystore");
    expect(configError(() => withFile(ssl + "ssl.keystore.location=/k.pem\nssl.client.auth=requested"))).toContain(
      "ssl.client.auth: requested on listener SSL needs the CA certificates",
    );
    expect(configError(() => withFile(ssl + "ssl.keystore.location=/k.pem\nlistener.name.internal.ssl.client.auth=required"))).toContain(
      "listener.name.internal.ssl.client.auth: required on listener INTERNAL",
    );
  });

  test("only PEM; no store password; bad client auth; an override for a listener that does not exist", () => {
    expect(configError(() => withFile("ssl.keystore.type=JKS"))).toContain("only PEM files are supported");
    expect(configError(() => withFile("ssl.truststore.type=PKCS12"))).toContain("only PEM files are supported");
    expect(configError(() => withFile("ssl.keystore.password=x"))).toContain("SSL key store password cannot be specified with PEM format");
    expect(configError(() => withFile("ssl.client.auth=sometimes"))).toContain("expected one of none|requested|required");
    expect(configError(() => withFile(ssl + "ssl.keystore.location=/k.pem\nlistener.name.other.ssl.keystore.location=/o.pem"))).toBe(
      "listener.name.other.ssl.*: OTHER is not a listener",
    );
    expect(configError(() => withFile("listener.name.ssl.sasl.mechanism=PLAIN"))).toContain("unknown key");
  });

  test("http.ssl.* for the side-port, and bunka's own timeouts", () => {
    const config = withFile(lines("http.ssl.keystore.location=/h.pem", "ssl.handshake.timeout.ms=2500", "ssl.reload.check.interval.ms=0"));
    expect(config.httpSsl).toEqual({ keystoreLocation: "/h.pem" });
    expect(config.sslHandshakeTimeoutMs).toBe(2500);
    expect(config.sslReloadCheckIntervalMs).toBe(0);
    expect(configError(() => withFile("http.ssl.truststore.location=/ca.pem"))).toContain("http.ssl.keystore.location: the other http.ssl.* settings need it");
    expect(configError(() => withFile("http.ssl.keystore.location=/h.pem\nhttp.ssl.client.auth=required"))).toContain("http.ssl.client.auth: required needs http.ssl.truststore.location");
    expect(configError(() => withFile("ssl.handshake.timeout.ms=0"))).toContain("out of range");
  });
});
