/**
 * The authorizer's keys in the config file: authorizer.class.name (StandardAuthorizer or nothing; any
 * other class a one-line ConfigError), super.users, allow.everyone.if.no.acl.found.
 */
import { describe, expect, test } from "bun:test";
import { parseServeArgs } from "../../../src/cli/config.ts";
import { STANDARD_AUTHORIZER_CLASS } from "../../../src/domain/security/acl-authorizer.ts";
import { ConfigError } from "../../../src/errors/errors.ts";

const withFile = (text: string) => parseServeArgs(["--config", "/b.properties"], {}, (path) => {
  if (path !== "/b.properties") throw new Error("ENOENT");
  return text;
});

describe("authorizer keys", () => {
  test("defaults: no authorizer, no super users, deny when no ACL is found", () => {
    const config = withFile("");
    expect([config.authorizerClassName, config.superUsers, config.allowEveryoneIfNoAclFound]).toEqual([undefined, [], false]);
  });

  test("StandardAuthorizer with super users and the no-ACL default", () => {
    const config = withFile(`authorizer.class.name=${STANDARD_AUTHORIZER_CLASS}\nsuper.users=User:admin;User:broker\nallow.everyone.if.no.acl.found=true\n`);
    expect([config.authorizerClassName, config.superUsers, config.allowEveryoneIfNoAclFound]).toEqual([STANDARD_AUTHORIZER_CLASS, ["User:admin", "User:broker"], true]);
    expect(withFile("authorizer.class.name=\n").authorizerClassName).toBeUndefined();
  });

  test("an unknown class is a one-line ConfigError naming it", () => {
    let caught: unknown;
    try {
      withFile("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n");
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const message = (caught as Error).message;
    expect(message).toContain("kafka.security.authorizer.AclAuthorizer");
    expect(message).not.toContain("\n");
  });
});
