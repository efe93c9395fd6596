/**
 * The SHA-256 that ties src/protocol/records/generated/kernels-wasm.ts to the kernel sources it was built
 * from: over kernels/Cargo.toml and every kernels/src/*.rs in name order, each as its name, a NUL, its
 * bytes and a NUL. Shared by scripts/build-kernels.ts and the unit test that checks the committed file.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export function kernelSourcesSha256(crate: string): string {
  const names = ["Cargo.toml", ...readdirSync(join(crate, "src")).filter((n) => n.endsWith(".rs")).sort().map((n) => `src/${n}`)];
  const hash = createHash("sha256");
  for (const name of names) {
    hash.update(name);
    hash.update("\0");
    hash.update(readFileSync(join(crate, name)));
    hash.update("\0");
  }
  return hash.digest("hex");
}
