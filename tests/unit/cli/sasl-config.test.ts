/**
 * The SASL keys in the config file: sasl.enabled.mechanisms (a subset of PLAIN, SCRAM-SHA-256,
 * SCRAM-SHA-512; GSSAPI and the rest a one-line ConfigError), sasl.plain.users.file,
 * connections.max.reauth.ms, connection.failed.authentication.delay.ms.
 */
import { describe, expect, test } from "bun:test";
import { parseServeArgs } from "../../../src/cli/config.ts";
import { ConfigError } from "../../../src/errors/errors.ts";

const withFile = (text: string) => parseServeArgs(["--config", "/b.properties"], {}, (path) => {
  if (path !== "/b.properties") throw new Error("ENOENT");
  return text;
});

function configError(text: string): string {
  try {
    withFile(text);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).not.toContain("\n");
    return (error as Error).message;
  }
  throw new Error("no ConfigError");
}

describe("SASL keys", () => {
  test("defaults: the two SCRAM mechanisms, no users file, sessions without end, 100 ms delay", () => {
    const c = withFile("");
    expect([c.saslEnabledMechanisms, c.saslPlainUsersFile, c.connectionsMaxReauthMs, c.connectionFailedAuthenticationDelayMs]).toEqual([["SCRAM-SHA-256", "SCRAM-SHA-512"], undefined, 0, 100]);
  });

  test("set: mechanisms trimmed and de-duplicated, the users file, reauth and delay", () => {
    const c = withFile("sasl.enabled.mechanisms=PLAIN, SCRAM-SHA-512,PLAIN\nsasl.plain.users.file=/etc/bunka/users\nconnections.max.reauth.ms=3600000\nconnection.failed.authentication.delay.ms=0\n");
    expect([c.saslEnabledMechanisms, c.saslPlainUsersFile, c.connectionsMaxReauthMs, c.connectionFailedAuthenticationDelayMs]).toEqual([["PLAIN", "SCRAM-SHA-512"], "/etc/bunka/users", 3_600_000, 0]);
  });

  test("GSSAPI, OAUTHBEARER and an empty list are refused with what bunka serves", () => {
    expect(configError("sasl.enabled.mechanisms=GSSAPI\n")).toContain('"GSSAPI" is not served (bunka serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)');
    expect(configError("sasl.enabled.mechanisms=SCRAM-SHA-256,OAUTHBEARER\n")).toContain('"OAUTHBEARER"');
    expect(configError("sasl.enabled.mechanisms= , \n")).toContain("no SASL mechanism given");
  });

  test("sasl.server.max.receive.size: 524288 by default, a positive size when set", () => {
    expect(withFile("").saslServerMaxReceiveSize).toBe(524288);
    expect(withFile("sasl.server.max.receive.size=1048576\n").saslServerMaxReceiveSize).toBe(1048576);
    expect(configError("sasl.server.max.receive.size=0\n")).toContain("sasl.server.max.receive.size");
  });

  test("listener.name.<name>.sasl.enabled.mechanisms: per listener, the name upper-cased; unknown mechanisms refused", () => {
    const c = withFile("listener.name.external.sasl.enabled.mechanisms=PLAIN\nlistener.name.INTERNAL.sasl.enabled.mechanisms=SCRAM-SHA-512\n");
    expect(c.listenerSaslEnabledMechanisms).toEqual({ EXTERNAL: ["PLAIN"], INTERNAL: ["SCRAM-SHA-512"] });
    expect(c.saslEnabledMechanisms).toEqual(["SCRAM-SHA-256", "SCRAM-SHA-512"]);
    expect(configError("listener.name.external.sasl.enabled.mechanisms=GSSAPI\n")).toContain("listener.name.external.sasl.enabled.mechanisms");
  });

  test("negative durations are refused", () => {
    expect(configError("connections.max.reauth.ms=-1\n")).toContain("connections.max.reauth.ms");
    expect(configError("connection.failed.authentication.delay.ms=-5\n")).toContain("connection.failed.authentication.delay.ms");
  });
});
