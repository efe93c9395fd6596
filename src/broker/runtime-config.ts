/**
 * The broker-level configs in effect while the broker runs: the static configuration (config file and
 * flags, BrokerConfig, which nothing changes after start) overlaid with the dynamic broker configs that
 * IncrementalAlterConfigs and AlterConfigs set on BROKER resources (the cluster default, then this
 * broker's own layer). The layers and their file are storage/broker-config-store.ts's, unchanged: this
 * module only holds what they add up to, so that readers look the values up instead of reading a
 * BrokerConfig that someone replaced a field of (docs/architecture.md, "Broker configs at runtime").
 *
 * Two kinds of value, the two that may change at runtime: the broker-level topic defaults (keyed by topic
 * config name, as resolveTopicConfigWithDefaults takes them) and the log cleaner's settings. Each is one
 * frozen object, replaced as a whole on a change, so that a reader can keep what it read for the length
 * of one decision and the Produce path reads it without an allocation. `onChange` tells the code that
 * must act on a change (open partitions' log configs) once the new values are in place.
 *
 * Changes go through `set` (this broker's change, durable before it resolves) and `refresh` (another
 * broker sharing the data directory changed the file); both leave the store and the values in effect
 * in step.
 */
import type { CleanerConfig } from "../domain/cleaner-config.ts";
import type { BrokerConfigLayer, BrokerConfigStore } from "../storage/broker-config-store.ts";

export class RuntimeConfig {
  private topicDefaultsInEffect: Readonly<Record<string, string>>;
  private cleanerInEffect: Readonly<CleanerConfig>;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly store: BrokerConfigStore) {
    this.topicDefaultsInEffect = Object.freeze(store.topicDefaults());
    this.cleanerInEffect = Object.freeze(store.cleaner());
  }

  /**
   * The broker-level topic defaults in effect, keyed by topic config name: static, overridden by the
   * cluster default, overridden by this broker's own layer.
   */
  topicDefaults(): Readonly<Record<string, string>> {
    return this.topicDefaultsInEffect;
  }

  /** The log cleaner's settings in effect (static, then the cluster default, then this broker's layer). */
  cleaner(): Readonly<CleanerConfig> {
    return this.cleanerInEffect;
  }

  /**
   * Replaces one layer's dynamic configs (see BrokerConfigStore.set: checked by the caller, durable
   * before this resolves); the values in effect follow before it resolves.
   */
  async set(layer: BrokerConfigLayer, configs: Readonly<Record<string, string>>): Promise<void> {
    await this.store.set(layer, configs);
    this.update();
  }

  /**
   * Reads the dynamic configs again (another broker may have changed them) and, when they differ, puts
   * the new values in effect. Resolves whether they differed.
   */
  async refresh(): Promise<boolean> {
    if (!(await this.store.refresh())) return false;
    this.update();
    return true;
  }

  /**
   * Calls `listener` after the values in effect changed (a change here or one `refresh` read). Returns
   * the function that stops it.
   */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private update(): void {
    const topicDefaults = this.store.topicDefaults();
    const cleaner = this.store.cleaner();
    if (sameValues(topicDefaults, this.topicDefaultsInEffect) && sameValues(cleaner, this.cleanerInEffect)) return;
    this.topicDefaultsInEffect = Object.freeze(topicDefaults);
    this.cleanerInEffect = Object.freeze(cleaner);
    for (const listener of this.listeners) {
      try {
        listener();
      } catch (error) {
        // The change is durable and in effect: a listener's bug must not make it look refused.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}

function sameValues(a: object, b: object): boolean {
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((key) => Object.hasOwn(right, key) && Object.is(left[key], right[key]));
}
