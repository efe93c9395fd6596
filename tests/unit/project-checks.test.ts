/**
 * Project-wide checks that belong in every test run: the layer rule of docs/architecture.md, "Layers" and
 * generated code that matches its generator and schemas.
 */
import { expect, test } from "bun:test";
import { layerViolations } from "../../scripts/check-layers.ts";

test("imports point down the layer chain", () => {
  expect(layerViolations()).toEqual([]);
});

test("generated codecs are exactly what the generator makes from the committed schemas", () => {
  const result = Bun.spawnSync(["bun", "scripts/gen-protocol.ts", "--check"], { cwd: `${import.meta.dir}/../..` });
  const output = result.stderr.toString() + result.stdout.toString();
  expect(output).toContain("generated code is up to date");
  expect(result.exitCode).toBe(0);
});
