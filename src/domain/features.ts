/**
 * The feature flags bunka answers in ApiVersions (supported and finalized features, KIP-584) and the rules
 * UpdateFeatures applies to them, as Apache's FeatureControlManager applies them (docs/architecture.md,
 * "Feature flags"). Pure: no I/O.
 *
 * Only levels bunka serves are offered. The features Apache 4.1.1 lists appear with the range bunka
 * supports, which is level 0 for each: bunka's transaction coordinator is transaction.version 0 (EndTxn
 * v5 and Produce v12 of KIP-890 part 2, what level 2 turns on in the Java producer, are not served; level
 * 1 only changes the record format of Apache's __transaction_state, which bunka does not have), and it
 * serves neither of the group protocols behind group.version (KIP-848) and share.version (KIP-932), nor
 * eligible leader replicas (one replica per partition). metadata.version and
 * kraft.version describe a KRaft metadata log and its quorum, which bunka does not have: they are left out,
 * as a broker that supports no level of a feature leaves it out. A level-0 feature is finalized at 0, which
 * the answer says by leaving it out of the finalized features (Apache's rule).
 */

export interface SupportedFeature {
  name: string;
  minVersion: number;
  maxVersion: number;
  /** The level in force: fixed by the release, since nothing in bunka changes with it. */
  finalizedLevel: number;
}

/** What bunka supports, by name (sorted, as the tools print them). */
export const SUPPORTED_FEATURES: readonly SupportedFeature[] = [
  { name: "eligible.leader.replicas.version", minVersion: 0, maxVersion: 0, finalizedLevel: 0 },
  { name: "group.version", minVersion: 0, maxVersion: 0, finalizedLevel: 0 },
  { name: "share.version", minVersion: 0, maxVersion: 0, finalizedLevel: 0 },
  { name: "transaction.version", minVersion: 0, maxVersion: 0, finalizedLevel: 0 },
];

/**
 * The epoch of the finalized levels. They are fixed by the release (nothing can raise them), so the epoch
 * never moves; a release that finalizes a higher level must answer a higher epoch, because clients keep the
 * levels of the highest epoch they have seen (the Java client's ApiVersions).
 */
export const FINALIZED_FEATURES_EPOCH = 0;

/**
 * The supported features for an ApiVersions answer at `apiVersion`. Before v4 a feature whose minimum is 0
 * is left out: older clients fail to read a minimum of 0 (KIP-1022; Apache omits them the same way).
 */
export function supportedFeaturesFor(apiVersion: number): { name: string; minVersion: number; maxVersion: number }[] {
  return SUPPORTED_FEATURES.filter((f) => apiVersion >= 4 || f.minVersion > 0).map((f) => ({
    name: f.name,
    minVersion: f.minVersion,
    maxVersion: f.maxVersion,
  }));
}

/** The finalized features for an ApiVersions answer: those above level 0 (none today). */
export function finalizedFeatures(): { name: string; maxVersionLevel: number; minVersionLevel: number }[] {
  return SUPPORTED_FEATURES.filter((f) => f.finalizedLevel > 0).map((f) => ({
    name: f.name,
    maxVersionLevel: f.finalizedLevel,
    minVersionLevel: f.finalizedLevel,
  }));
}

/** UpdateFeatures' upgrade types (Apache's FeatureUpdate.UpgradeType codes). */
export const UpgradeType = { UPGRADE: 1, SAFE_DOWNGRADE: 2, UNSAFE_DOWNGRADE: 3 } as const;

export interface FeatureUpdate {
  feature: string;
  maxVersionLevel: number;
  upgradeType: number;
}

/**
 * Why `update` cannot be applied, in Apache's words ("Invalid update version 2 for feature
 * transaction.version. Local controller 0 does not support this feature."), or null when it can (it then
 * changes nothing: it names the level the feature is at). `controllerId` is the broker answering as
 * controller, which Apache names in the message; `features` is the table (the unit tests pass one with
 * levels above 0, which the rules already cover).
 */
export function updateRefusal(
  update: FeatureUpdate,
  controllerId: number,
  features: readonly SupportedFeature[] = SUPPORTED_FEATURES,
): string | null {
  const { feature, maxVersionLevel: level, upgradeType } = update;
  const invalid = (reason: string) => `Invalid update version ${level} for feature ${feature}. ${reason}`;
  if (upgradeType !== UpgradeType.UPGRADE && upgradeType !== UpgradeType.SAFE_DOWNGRADE && upgradeType !== UpgradeType.UNSAFE_DOWNGRADE) {
    return invalid("The controller does not support the given upgrade type.");
  }
  if (level < 0) return invalid("A feature version cannot be less than 0.");
  const supported = features.find((f) => f.name === feature);
  // An unknown feature is one supported at level 0 only (Apache's DISABLED range), except metadata.version,
  // which a KRaft controller always has and bunka never: any level of it is refused.
  const range = feature === "metadata.version" ? undefined : (supported ?? { minVersion: 0, maxVersion: 0 });
  if (range === undefined || level < range.minVersion || level > range.maxVersion) {
    const what = `Local controller ${controllerId}`;
    if (range === undefined || range.maxVersion === 0) return invalid(`${what} does not support this feature.`);
    return invalid(`${what} only supports versions ${range.minVersion}-${range.maxVersion}`);
  }
  const current = supported?.finalizedLevel ?? 0;
  if (level < current && upgradeType === UpgradeType.UPGRADE) {
    return invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.");
  }
  if (level > current && upgradeType !== UpgradeType.UPGRADE) return invalid("Can't downgrade to a newer version.");
  if (supported === undefined) return invalid(`Feature ${feature} not found.`);
  return null;
}
