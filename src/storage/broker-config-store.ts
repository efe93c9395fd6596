/**
 * Durable dynamic broker configs (IncrementalAlterConfigs on BROKER resources), in one state file,
 * `<data>/__cluster/broker-configs.json`.
 *
 * Two layers, as in Apache Kafka: the cluster-wide default (resource name "", DescribeConfigs source
 * DYNAMIC_DEFAULT_BROKER_CONFIG) and one layer per broker id (source DYNAMIC_BROKER_CONFIG), which wins
 * over the cluster default for that broker. Both sit above the static configuration (config file and
 * flags) and Apache's built-in defaults. Two kinds of broker config can be set here, keyed by their
 * broker config name (the name clients send): the broker-level topic defaults (log.retention.ms, ...,
 * see BROKER_CONFIG_FOR_TOPIC_CONFIG) and the log cleaner's dynamic settings (log.cleaner.threads, ...,
 * see domain/cleaner-config.ts).
 *
 * A change is answered only once the file is durable, changes run one at a time, and a failed write
 * poisons the store (storage/shared-state-file.ts): memory may then disagree with the disk, so every later
 * change fails until a restart reloads the file. A file that exists but fails
 * its checks is a CorruptStateError at open, never an empty configuration: silently forgetting an
 * operator's retention setting would delete data or keep it longer than promised.
 *
 * Brokers sharing the data directory share the file. `refresh` reads it again when another broker
 * changed it (announced through etcd, and before every change under the metadata gate, so that a change
 * merges with the latest layers); `onChange` reports this store's own changes, so they can be announced.
 */
import { join } from "node:path";
import {
  applyCleanerSettings,
  type CleanerConfig,
  cleanerSettingProblem,
  isDynamicCleanerSetting,
} from "../domain/cleaner-config.ts";
import { brokerTopicDefaultProblem, topicConfigForBrokerConfig } from "../domain/topic-config.ts";
import type { Fs } from "../platform/fs.ts";
import { ensureDir } from "./atomic-file.ts";
import { SharedStateFile } from "./shared-state-file.ts";
import { loadState, saveState } from "./state-file.ts";

export const BROKER_CONFIGS_FORMAT = "broker-configs";
export const BROKER_CONFIGS_VERSION = 1;
export const BROKER_CONFIGS_FILE = "broker-configs.json";

/** The layer a change applies to: the cluster-wide default, or one broker by id. */
export type BrokerConfigLayer = { kind: "cluster" } | { kind: "broker"; brokerId: number };

export interface BrokerConfigsBody {
  /** Cluster-wide defaults, by broker config name. */
  clusterDefault: Record<string, string>;
  /** Per-broker overrides, by broker id (decimal), then broker config name. */
  brokers: Record<string, Record<string, string>>;
}

export interface BrokerConfigStoreOptions {
  /** The broker this process is: its own layer is applied by `topicDefaults`. */
  brokerId: number;
  /**
   * The broker-level topic defaults from the static configuration (BrokerConfig.topicConfigDefaults as
   * the CLI built it, keyed by topic config name). Kept apart so DescribeConfigs can say which values
   * are static and which dynamic.
   */
  staticTopicDefaults: Readonly<Record<string, string>>;
  /** The cleaner settings from the static configuration (BrokerConfig.cleaner as the CLI built it). */
  staticCleaner: Readonly<CleanerConfig>;
}

export class BrokerConfigStore {
  private readonly file: SharedStateFile<BrokerConfigsBody>;
  readonly path: string;
  readonly brokerId: number;
  readonly staticTopicDefaults: Readonly<Record<string, string>>;
  readonly staticCleaner: Readonly<CleanerConfig>;

  private constructor(
    fs: Fs,
    dataDir: string,
    options: BrokerConfigStoreOptions,
    body: BrokerConfigsBody,
  ) {
    this.path = join(dataDir, "__cluster", BROKER_CONFIGS_FILE);
    this.brokerId = options.brokerId;
    this.staticTopicDefaults = Object.freeze({ ...options.staticTopicDefaults });
    this.staticCleaner = Object.freeze({ ...options.staticCleaner });
    const path = this.path;
    this.file = new SharedStateFile(body, {
      what: "the broker config store",
      save: (next) => saveState(fs, path, BROKER_CONFIGS_FORMAT, BROKER_CONFIGS_VERSION, next),
      // A file gone (removed by hand) reads as no dynamic configs, as at open.
      load: async () => (await loadState(fs, path, BROKER_CONFIGS_FORMAT, { current: BROKER_CONFIGS_VERSION, parse: parseBrokerConfigsBody })) ?? { clusterDefault: {}, brokers: {} },
      same: sameBody,
    });
  }

  private get body(): BrokerConfigsBody {
    return this.file.value;
  }

  /** Loads the file (absent means no dynamic configs yet); CorruptStateError if it is damaged. */
  static async open(fs: Fs, dataDir: string, options: BrokerConfigStoreOptions): Promise<BrokerConfigStore> {
    await ensureDir(fs, join(dataDir, "__cluster"));
    const path = join(dataDir, "__cluster", BROKER_CONFIGS_FILE);
    const body = await loadState(fs, path, BROKER_CONFIGS_FORMAT, {
      current: BROKER_CONFIGS_VERSION,
      parse: parseBrokerConfigsBody,
    });
    return new BrokerConfigStore(fs, dataDir, options, body ?? { clusterDefault: {}, brokers: {} });
  }

  /** The dynamic configs of one layer, by broker config name. */
  get(layer: BrokerConfigLayer): Readonly<Record<string, string>> {
    return layer.kind === "cluster" ? this.body.clusterDefault : (this.body.brokers[String(layer.brokerId)] ?? {});
  }

  /**
   * Replaces one layer's configs and makes the change durable before resolving. The configs must be
   * valid (the handler checks them and answers the client's mistakes); an invalid one is a caller bug
   * and throws without touching anything.
   */
  set(layer: BrokerConfigLayer, configs: Readonly<Record<string, string>>): Promise<void> {
    const problem = configsProblem(configs);
    if (problem !== null) return Promise.reject(new TypeError(`invalid dynamic broker configs: ${problem}`));
    return this.file.change((current) => {
      const next: BrokerConfigsBody = { clusterDefault: { ...current.clusterDefault }, brokers: { ...current.brokers } };
      if (layer.kind === "cluster") next.clusterDefault = { ...configs };
      else if (Object.keys(configs).length === 0) delete next.brokers[String(layer.brokerId)];
      else next.brokers[String(layer.brokerId)] = { ...configs };
      return next;
    });
  }

  /**
   * Reads the file again, in turn with this store's changes, because another broker sharing the data
   * directory may have changed it. Resolves whether anything differs from what was held. A damaged file
   * is a CorruptStateError naming it and the configs held are kept; a file gone (removed by hand) reads
   * as no dynamic configs, as at open.
   */
  refresh(): Promise<boolean> {
    return this.file.refresh();
  }

  /** Calls `listener` after each change this store makes is durable. Returns the function that stops it. */
  onChange(listener: () => void): () => void {
    return this.file.onChange(listener);
  }

  /**
   * The broker-level topic defaults in effect on this broker, keyed by topic config name (the shape of
   * BrokerConfig.topicConfigDefaults): static, overridden by the cluster default, overridden by this
   * broker's own layer.
   */
  topicDefaults(): Record<string, string> {
    return this.topicDefaultsWith(this.get({ kind: "cluster" }), this.get({ kind: "broker", brokerId: this.brokerId }));
  }

  /** The cleaner settings in effect on this broker (BrokerConfig.cleaner): static, then cluster, then own layer. */
  cleaner(): CleanerConfig {
    return this.cleanerWith(this.get({ kind: "cluster" }), this.get({ kind: "broker", brokerId: this.brokerId }));
  }

  /**
   * What topicDefaults() and cleaner() would give if `layer` held `configs`: handlers check a change
   * against the settings it would produce before storing it.
   */
  effectiveWith(layer: BrokerConfigLayer, configs: Readonly<Record<string, string>>): { topicDefaults: Record<string, string>; cleaner: CleanerConfig } {
    const cluster = layer.kind === "cluster" ? configs : this.get({ kind: "cluster" });
    const own = layer.kind === "broker" && layer.brokerId === this.brokerId ? configs : this.get({ kind: "broker", brokerId: this.brokerId });
    return { topicDefaults: this.topicDefaultsWith(cluster, own), cleaner: this.cleanerWith(cluster, own) };
  }

  private topicDefaultsWith(...layers: Readonly<Record<string, string>>[]): Record<string, string> {
    const result: Record<string, string> = { ...this.staticTopicDefaults };
    for (const layer of layers) {
      for (const [brokerName, value] of Object.entries(layer)) {
        const topicName = topicConfigForBrokerConfig(brokerName);
        if (topicName !== undefined) result[topicName] = value;
      }
    }
    return result;
  }

  private cleanerWith(...layers: Readonly<Record<string, string>>[]): CleanerConfig {
    return layers.reduce<CleanerConfig>((config, layer) => applyCleanerSettings(config, layer), { ...this.staticCleaner });
  }
}

/** Why a layer's configs cannot be stored, or null. */
function configsProblem(configs: Readonly<Record<string, unknown>>): string | null {
  for (const [name, value] of Object.entries(configs)) {
    if (typeof value !== "string") return `${name} is not a string`;
    if (isDynamicCleanerSetting(name)) {
      const problem = cleanerSettingProblem(name, value);
      if (problem !== null) return problem;
      continue;
    }
    const problem = brokerTopicDefaultProblem(name, value);
    if (problem !== null) return problem.reason;
  }
  return null;
}

function sameLayer(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

function sameBody(a: BrokerConfigsBody, b: BrokerConfigsBody): boolean {
  const ids = Object.keys(a.brokers);
  return (
    sameLayer(a.clusterDefault, b.clusterDefault) &&
    ids.length === Object.keys(b.brokers).length &&
    ids.every((id) => Object.hasOwn(b.brokers, id) && sameLayer(a.brokers[id]!, b.brokers[id]!))
  );
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Checks a stored body; throws with the reason (loadState names the file and marks it corrupt). */
export function parseBrokerConfigsBody(body: unknown): BrokerConfigsBody {
  if (!isRecord(body)) throw new Error("not an object");
  const { clusterDefault, brokers } = body;
  if (!isRecord(clusterDefault)) throw new Error("clusterDefault must be an object");
  const problem = configsProblem(clusterDefault);
  if (problem !== null) throw new Error(`clusterDefault: ${problem}`);
  if (!isRecord(brokers)) throw new Error("brokers must be an object");
  const parsed: BrokerConfigsBody = { clusterDefault: { ...(clusterDefault as Record<string, string>) }, brokers: {} };
  for (const [id, layer] of Object.entries(brokers)) {
    if (!/^(0|[1-9][0-9]{0,9})$/.test(id) || Number(id) > 2147483647) throw new Error(`invalid broker id ${JSON.stringify(id)}`);
    if (!isRecord(layer)) throw new Error(`brokers.${id} must be an object`);
    const layerProblem = configsProblem(layer);
    if (layerProblem !== null) throw new Error(`brokers.${id}: ${layerProblem}`);
    parsed.brokers[id] = { ...(layer as Record<string, string>) };
  }
  return parsed;
}
