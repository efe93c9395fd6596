/**
 * What the broker knows of damaged partition data (docs/operations.md, "Damaged data"): one list of
 * findings per partition, filled by the three places that look at segment bytes (recovery at open, the
 * Fetch read path, the background scrubber) and read by Fetch, /ready and /metrics, so that all of them
 * tell the same story.
 *
 * A finding is named by its segment file and byte position: the same damage found again (every Fetch that
 * reaches it, every scrubber pass) is recorded and logged once. A partition refused at open has one
 * finding with `refused` set: it is not served at all until the operator dealt with it and restarted.
 * The registry is memory only: a restart looks at the data again.
 */
import type { Clock } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";

export type DamageFinder = "open" | "read" | "scrubber";

export interface SegmentDamage {
  /** `<topic>-<partition>`. */
  partition: string;
  /** The segment file (`<base offset, 20 digits>.log`), or the file an open refused on. */
  file: string;
  /** Where the damaged batch starts in the file; -1 when the damage is not placed on one batch. */
  position: number;
  /** The offset the damaged batch should start with; -1 when unknown. */
  offset: number;
  reason: string;
  foundBy: DamageFinder;
  /** Wall-clock time of the first finding. */
  foundAtMs: number;
  /** The partition was refused at open: nothing of it is served. */
  refused: boolean;
}

export type NewSegmentDamage = Omit<SegmentDamage, "foundAtMs" | "refused"> & { refused?: boolean };

/**
 * Damage in a state file the broker runs on (a transaction slot's or a group slot's checkpoint or journal)
 * that a check while it ran found: the file no longer holds what this process wrote. The broker goes on
 * from memory, which is right; the next start would refuse the file (docs/operations.md, "Damaged data").
 */
export interface StateFileDamage {
  /** Which store: `txn_state` or `offsets`. */
  store: string;
  /** The file, as the check named it. */
  file: string;
  reason: string;
  /** Wall-clock time of the first finding. */
  foundAtMs: number;
  /** The broker rewrote the file from memory (the store's `repair`); -1 until it did. */
  repairedAtMs: number;
}


/** Findings kept per partition: past this, the count still grows but no more are listed. */
const FINDINGS_PER_PARTITION_MAX = 100;

export class SegmentDamageRegistry {
  private readonly byPartition = new Map<string, SegmentDamage[]>();
  private readonly stateFiles: StateFileDamage[] = [];
  private recorded = 0;

  constructor(
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /**
   * Records a finding and logs it at warn (error for a refusal), unless the same file and position is
   * already recorded for the partition. Returns whether it was new.
   */
  record(damage: NewSegmentDamage): boolean {
    let list = this.byPartition.get(damage.partition);
    if (list?.some((d) => d.file === damage.file && d.position === damage.position)) return false;
    if (list === undefined) this.byPartition.set(damage.partition, (list = []));
    const finding: SegmentDamage = { ...damage, refused: damage.refused ?? false, foundAtMs: this.clock.nowMs() };
    this.recorded++;
    if (list.length < FINDINGS_PER_PARTITION_MAX) list.push(finding);
    const fields = {
      partition: finding.partition,
      file: finding.file,
      position: finding.position,
      offset: finding.offset,
      reason: finding.reason,
      foundBy: finding.foundBy,
    };
    // "corrupt" in the line: what log watchers (and the crash tests) look for.
    if (finding.refused) this.log.error("corrupt partition data: the partition is not served", fields);
    else this.log.warn("corrupt partition data: a batch fails its checks and is not served", fields);
    return true;
  }

  /**
   * Records damage found in a state file, and logs it at error, unless the same file is already recorded,
   * not yet repaired, with the same reason. Returns the finding when it was new.
   */
  recordStateFile(damage: Omit<StateFileDamage, "foundAtMs" | "repairedAtMs">): StateFileDamage | undefined {
    if (this.stateFiles.some((d) => d.repairedAtMs < 0 && d.file === damage.file && d.reason === damage.reason)) return undefined;
    const finding: StateFileDamage = { ...damage, foundAtMs: this.clock.nowMs(), repairedAtMs: -1 };
    this.stateFiles.push(finding);
    if (this.stateFiles.length > FINDINGS_PER_PARTITION_MAX) this.stateFiles.shift();
    this.log.error("corrupt state file: it no longer holds what this broker wrote", { ...damage });
    return finding;
  }

  /** The store rewrote the file of `finding` from memory. */
  stateFileRepaired(finding: StateFileDamage): void {
    finding.repairedAtMs = this.clock.nowMs();
    this.log.warn("state file rewritten from memory after damage: check the device", { store: finding.store, file: finding.file });
  }

  /** State files found damaged while the broker ran, oldest first, repaired ones included. */
  stateFileFindings(): readonly StateFileDamage[] {
    return this.stateFiles;
  }

  /** State files found damaged and not (yet) rewritten: /ready says degraded while any. */
  unrepairedStateFiles(): readonly StateFileDamage[] {
    return this.stateFiles.filter((d) => d.repairedAtMs < 0);
  }

  /** The findings of one partition, oldest first (empty when none). */
  findings(partition: string): readonly SegmentDamage[] {
    return this.byPartition.get(partition) ?? [];
  }

  /** The refusal of a partition at open, if it was refused. */
  refusal(partition: string): SegmentDamage | undefined {
    return this.byPartition.get(partition)?.find((d) => d.refused);
  }

  /** Partitions with at least one finding, sorted. */
  damagedPartitions(): string[] {
    return [...this.byPartition.keys()].sort();
  }

  /** Findings recorded since start (also those past the per-partition list bound). */
  get findingsRecorded(): number {
    return this.recorded;
  }

  /**
   * Drops the findings of `partition` that `keep` rejects: the scrubber's findings in segment files that
   * retention or the cleaner removed or replaced since. Refusals are never dropped.
   */
  retain(partition: string, keep: (damage: SegmentDamage) => boolean): void {
    const list = this.byPartition.get(partition);
    if (list === undefined) return;
    const kept = list.filter((d) => d.refused || keep(d));
    if (kept.length === 0) this.byPartition.delete(partition);
    else this.byPartition.set(partition, kept);
  }

  /** Forgets every finding of a partition (its topic was deleted; its files are gone). */
  forget(partition: string): void {
    this.byPartition.delete(partition);
  }
}
