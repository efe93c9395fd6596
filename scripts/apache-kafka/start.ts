#!/usr/bin/env bun
/**
 * Start the reference Apache Kafka broker: single-node KRaft (combined broker+controller) on free loopback
 * ports, in a fresh temp data dir (storage formatted first with `kafka-storage format --standalone`), and
 * wait until it serves Metadata with itself unfenced. Prints, one per line:
 *
 *   BOOTSTRAP=127.0.0.1:PORT   (the advertised listener)
 *   PORT=...  CONTROLLER_PORT=...  PID=...  DATA_DIR=...  LOG=...
 *
 * By default the JVM is left running in its own process group; stop it with `kill $PID; rm -rf $DATA_DIR`.
 * With --foreground the script stays, and Ctrl-C / SIGTERM stops the broker and removes the data dir.
 *
 * Options (env in brackets):
 *   --advertised-port N [KAFKA_ADVERTISED_PORT]   advertise this port instead (a recording proxy in front)
 *   --advertised-host H [KAFKA_ADVERTISED_HOST]   default 127.0.0.1
 *   --data-dir DIR                                use DIR (kept on stop) instead of a temp dir
 *   --set key=value                               extra server.properties entry (repeatable)
 *   --foreground
 * Broker settings are Kafka's defaults except the single-node replication factors of the internal topics.
 */
import { startApacheKafka, type StartOptions } from "../../tests/support/apache-kafka.ts";

const args = process.argv.slice(2);
const opts: StartOptions = { serverProperties: {} };
let foreground = false;
const envPort = process.env.KAFKA_ADVERTISED_PORT;
if (envPort) opts.advertisedPort = Number(envPort);
if (process.env.KAFKA_ADVERTISED_HOST) opts.advertisedHost = process.env.KAFKA_ADVERTISED_HOST;

function usage(msg: string): never {
  console.error(`start: ${msg}\nusage: start.sh [--advertised-port N] [--advertised-host H] [--data-dir DIR] [--set k=v]... [--foreground]`);
  process.exit(2);
}
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const val = () => args[++i] ?? usage(`${a} needs a value`);
  if (a === "--advertised-port") opts.advertisedPort = Number(val());
  else if (a === "--advertised-host") opts.advertisedHost = val();
  else if (a === "--data-dir") opts.dataDir = val();
  else if (a === "--set") {
    const kv = val();
    const eq = kv.indexOf("=");
    if (eq <= 0) usage(`--set wants key=value, got ${kv}`);
    opts.serverProperties![kv.slice(0, eq)] = kv.slice(eq + 1);
  } else if (a === "--foreground") foreground = true;
  else if (a === "-h" || a === "--help") usage("help");
  else usage(`unknown argument ${a}`);
}
if (opts.advertisedPort !== undefined && !(Number.isInteger(opts.advertisedPort) && opts.advertisedPort > 0 && opts.advertisedPort < 65536))
  usage("advertised port must be 1..65535");

opts.detached = !foreground;
const kafka = await startApacheKafka(opts);
console.log(`BOOTSTRAP=${kafka.bootstrap}`);
console.log(`PORT=${kafka.port}`);
console.log(`CONTROLLER_PORT=${kafka.controllerPort}`);
console.log(`PID=${kafka.pid}`);
console.log(`DATA_DIR=${kafka.dataDir}`);
console.log(`LOG=${kafka.logFile}`);

if (foreground) {
  const shutdown = async () => {
    await kafka.stop();
    process.exit(0);
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
  await new Promise(() => {});
}
