/**
 * The feature table and UpdateFeatures' rules (src/domain/features.ts), with Apache 4.1's messages: the
 * table bunka answers, and the rules on a table with levels above 0, as a release serving one would have.
 */
import { describe, expect, test } from "bun:test";
import { finalizedFeatures, supportedFeaturesFor, type SupportedFeature, updateRefusal, UpgradeType } from "../../../src/domain/features.ts";

describe("the answered features", () => {
  test("v4 lists every feature at level 0; v3 leaves out those whose minimum is 0; nothing is finalized above 0", () => {
    expect(supportedFeaturesFor(4).map((f) => [f.name, f.minVersion, f.maxVersion])).toEqual([
      ["eligible.leader.replicas.version", 0, 0],
      ["group.version", 0, 0],
      ["share.version", 0, 0],
      ["transaction.version", 0, 0],
    ]);
    expect(supportedFeaturesFor(3)).toEqual([]);
    expect(finalizedFeatures()).toEqual([]);
  });
});

describe("updateRefusal", () => {
  const table: SupportedFeature[] = [{ name: "transaction.version", minVersion: 0, maxVersion: 2, finalizedLevel: 2 }];
  const refusal = (feature: string, level: number, upgradeType: number = UpgradeType.UPGRADE) =>
    updateRefusal({ feature, maxVersionLevel: level, upgradeType }, 1, table);

  test("a level outside the supported range names the range, as Apache's QuorumFeatures", () => {
    expect(refusal("transaction.version", 3)).toBe("Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2");
    expect(refusal("group.version", 1)).toBe("Invalid update version 1 for feature group.version. Local controller 1 does not support this feature.");
  });

  test("downgrades need a downgrade type, and a downgrade type cannot raise a level", () => {
    expect(refusal("transaction.version", 1)).toBe(
      "Invalid update version 1 for feature transaction.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.",
    );
    expect(refusal("transaction.version", 1, UpgradeType.SAFE_DOWNGRADE)).toBeNull();
    expect(refusal("transaction.version", 0, UpgradeType.UNSAFE_DOWNGRADE)).toBeNull();
    expect(refusal("transaction.version", 2)).toBeNull();
    const raise: SupportedFeature[] = [{ ...table[0]!, finalizedLevel: 1 }];
    expect(updateRefusal({ feature: "transaction.version", maxVersionLevel: 2, upgradeType: UpgradeType.SAFE_DOWNGRADE }, 1, raise)).toBe(
      "Invalid update version 2 for feature transaction.version. Can't downgrade to a newer version.",
    );
  });

  test("a feature nobody knows, at level 0, is not found; metadata.version is never supported", () => {
    expect(refusal("no.such.feature", 0)).toBe("Invalid update version 0 for feature no.such.feature. Feature no.such.feature not found.");
    expect(refusal("metadata.version", 0)).toBe("Invalid update version 0 for feature metadata.version. Local controller 1 does not support this feature.");
  });
});
