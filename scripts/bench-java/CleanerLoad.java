/*
 * The load tool of scripts/bench-cleaner.ts (Apache Kafka's Java producer, the same jars for both brokers).
 * Compiled at run time by the script into .cache/bench-java/ against .cache/apache-kafka-<version>/libs/*.
 * Not a test. Two modes:
 *
 *   java -cp <classes>:<libs>/* CleanerLoad fill --bootstrap H:P --topic T --bytes N --keys K
 *        [--value-min 200] [--value-max 1800] [--tombstone-pct 1] [--compression none|gzip|snappy|lz4|zstd]
 *        [--batch-size 16384] [--linger-ms 5] [--seed 1]
 *
 *     Sends keyed records as fast as the producer goes until their keys and values add up to N bytes. Each
 *     key is drawn uniformly from K keys ("key-000000042"), so a key has about N / (K * mean value size)
 *     versions and the cleaner keeps the latest of each. A value is JSON-like text of a uniformly drawn size
 *     in [value-min, value-max]: a few fields, then text cut at a random place from a corpus of words of a
 *     small vocabulary, so that lz4 and zstd compress it roughly as they would real documents, not as random
 *     bytes (which do not compress) or as repeated bytes (which compress absurdly well). --tombstone-pct of
 *     the records are tombstones (null value).
 *     acks=all; everything else is the Java producer's default unless given.
 *
 *   java ... CleanerLoad steady --bootstrap H:P --topic T --rate R --record-size S --max-duration S
 *        --out FILE [--stop-file FILE] [--linger-ms 0]
 *
 *     Sends R records of S bytes per second (keyless, acks=all) on a fixed schedule from one thread, until
 *     --stop-file exists or --max-duration passes, and writes one sample per acknowledged record to FILE:
 *     big-endian int64 scheduled send time (epoch microseconds) and int32 latency (microseconds) from the
 *     scheduled send time to the acknowledgement. Timing from the schedule rather than from the send() call
 *     counts a stall of the sender (a full buffer, a blocked send) as latency instead of hiding it.
 *
 * Output: progress lines, then one line "RESULT {json}".
 */
import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class CleanerLoad {
  static String bootstrap;
  static String topic;
  static long totalBytes = 256L << 20;
  static int keys = 100_000;
  static int valueMin = 200;
  static int valueMax = 1800;
  static double tombstonePct = 1;
  static String compression = "none";
  static Integer batchSize;
  static Integer lingerMs;
  static long seed = 1;
  static double rate = 1000;
  static int recordSize = 1024;
  static double maxDurationS = 300;
  static String out;
  static String stopFile;

  static final AtomicLong errors = new AtomicLong();
  static final AtomicReference<String> firstError = new AtomicReference<>();

  static void fail(Exception e) {
    errors.incrementAndGet();
    if (firstError.compareAndSet(null, e.getClass().getName() + ": " + e.getMessage())) {
      System.out.println("error " + firstError.get());
      System.out.flush();
    }
  }

  static KafkaProducer<byte[], byte[]> producer() {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
    if (batchSize != null) p.put(ProducerConfig.BATCH_SIZE_CONFIG, batchSize);
    if (lingerMs != null) p.put(ProducerConfig.LINGER_MS_CONFIG, lingerMs);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return new KafkaProducer<>(p);
  }

  static final String[] WORDS = (
      "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
      + "romeo sierra tango uniform victor whiskey xray yankee zulu order customer invoice payment shipped pending "
      + "active closed region north south east west warehouse item quantity price discount total currency euro "
      + "dollar account balance updated created status priority normal high low note comment review approved")
      .split(" ");
  static final byte[][] WORD_BYTES = new byte[WORDS.length][];
  static {
    for (int i = 0; i < WORDS.length; i++) WORD_BYTES[i] = WORDS[i].getBytes(StandardCharsets.US_ASCII);
  }

  /**
   * Text the values are cut from: words of the vocabulary in random order, separated by spaces and the odd
   * comma. Cutting a slice at a random place costs a copy, where writing every value word by word made the
   * producer's thread the bottleneck of the fill.
   */
  static byte[] corpus(SplittableRandom r, int size) {
    byte[] c = new byte[size];
    int at = 0;
    while (at < size) {
      byte[] w = WORD_BYTES[r.nextInt(WORD_BYTES.length)];
      for (int i = 0; i < w.length && at < size; i++) c[at++] = w[i];
      if (at < size) c[at++] = (byte) (r.nextInt(8) == 0 ? ',' : ' ');
    }
    return c;
  }

  static final byte[] HEAD = "{\"id\":\"key-".getBytes(StandardCharsets.US_ASCII);
  static final byte[] MID = "\",\"version\":".getBytes(StandardCharsets.US_ASCII);
  static final byte[] TEXT = ",\"status\":\"active\",\"text\":\"".getBytes(StandardCharsets.US_ASCII);

  /** Writes `n` as exactly `digits` decimal digits at `at`; returns the position after them. */
  static int digits(byte[] b, int at, long n, int digits) {
    for (int i = digits - 1; i >= 0; i--) {
      b[at + i] = (byte) ('0' + (n % 10));
      n /= 10;
    }
    return at + digits;
  }

  static int put(byte[] b, int at, byte[] part) {
    System.arraycopy(part, 0, b, at, part.length);
    return at + part.length;
  }

  /** The key of key number `k`: "key-" and 9 digits. */
  static byte[] key(int k) {
    byte[] b = new byte[13];
    put(b, 0, "key-".getBytes(StandardCharsets.US_ASCII));
    digits(b, 4, k, 9);
    return b;
  }

  /**
   * A JSON-like document of exactly `size` bytes (size >= 64) about key `k`: a few fields, then text cut
   * from the corpus at a random place.
   */
  static byte[] value(SplittableRandom r, byte[] corpus, int k, long version, int size) {
    byte[] v = new byte[size];
    int at = put(v, 0, HEAD);
    at = digits(v, at, k, 9);
    at = put(v, at, MID);
    at = digits(v, at, version, 12);
    at = put(v, at, TEXT);
    int text = size - 2 - at;
    System.arraycopy(corpus, r.nextInt(corpus.length - text), v, at, text);
    v[size - 2] = '"';
    v[size - 1] = '}';
    return v;
  }

  static void fill() throws Exception {
    SplittableRandom r = new SplittableRandom(seed);
    byte[] text = corpus(r, 8 << 20);
    byte[][] keyBytes = new byte[keys][];
    for (int k = 0; k < keys; k++) keyBytes[k] = key(k);
    long sentBytes = 0;
    long records = 0;
    long tombstones = 0;
    long t0 = System.nanoTime();
    long lastReport = t0;
    try (KafkaProducer<byte[], byte[]> p = producer()) {
      while (sentBytes < totalBytes && errors.get() == 0) {
        int k = r.nextInt(keys);
        byte[] key = keyBytes[k];
        byte[] v = null;
        if (r.nextDouble() * 100 >= tombstonePct) {
          v = value(r, text, k, records, valueMin + r.nextInt(valueMax - valueMin + 1));
          sentBytes += v.length;
        } else {
          tombstones++;
        }
        sentBytes += key.length;
        records++;
        p.send(new ProducerRecord<>(topic, 0, key, v), (md, e) -> {
          if (e != null) fail(e);
        });
        long now = System.nanoTime();
        if (now - lastReport > 5_000_000_000L) {
          lastReport = now;
          System.out.printf("fill: %d records, %.0f MB in %.1f s%n", records, sentBytes / 1048576.0, (now - t0) / 1e9);
          System.out.flush();
        }
      }
      p.flush();
    }
    double s = (System.nanoTime() - t0) / 1e9;
    System.out.printf(
        "RESULT {\"records\":%d,\"tombstones\":%d,\"bytes\":%d,\"seconds\":%.3f,\"errors\":%d,\"firstError\":%s}%n",
        records, tombstones, sentBytes, s, errors.get(), jsonString(firstError.get()));
  }

  static void steady() throws Exception {
    if (out == null) throw new IllegalArgumentException("steady needs --out");
    int capacity = (int) Math.min(Integer.MAX_VALUE - 8, Math.ceil(rate * maxDurationS) + 16);
    long[] sendUs = new long[capacity];
    int[] latencyUs = new int[capacity];
    AtomicLong acked = new AtomicLong();
    byte[] payload = new byte[recordSize];
    new SplittableRandom(seed).nextBytes(payload);
    double intervalNs = 1e9 / rate;
    long sent = 0;
    long behindMaxNs = 0;
    Path stop = stopFile == null ? null : Path.of(stopFile);
    try (KafkaProducer<byte[], byte[]> p = producer()) {
      // One round trip before the clock starts, so that the metadata fetch is not the first sample.
      p.send(new ProducerRecord<>(topic, payload)).get();
      long epochUs0 = System.currentTimeMillis() * 1000;
      long t0 = System.nanoTime();
      long endNs = t0 + (long) (maxDurationS * 1e9);
      long nextStopCheck = t0;
      while (sent < capacity && errors.get() == 0) {
        long due = t0 + (long) (sent * intervalNs);
        long now = System.nanoTime();
        if (due > now) {
          LockSupport.parkNanos(due - now);
          now = System.nanoTime();
        } else {
          behindMaxNs = Math.max(behindMaxNs, now - due);
        }
        if (now >= endNs) break;
        if (stop != null && now >= nextStopCheck) {
          nextStopCheck = now + 100_000_000L;
          if (Files.exists(stop)) break;
        }
        final int i = (int) sent;
        final long scheduled = due;
        sendUs[i] = epochUs0 + (due - t0) / 1000;
        latencyUs[i] = -1;
        p.send(new ProducerRecord<>(topic, payload), (md, e) -> {
          if (e != null) {
            fail(e);
            return;
          }
          latencyUs[i] = (int) Math.min(Integer.MAX_VALUE, (System.nanoTime() - scheduled) / 1000);
          acked.incrementAndGet();
        });
        sent++;
      }
      p.flush();
    }
    try (DataOutputStream d = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(out), 1 << 16))) {
      for (int i = 0; i < sent; i++) {
        if (latencyUs[i] < 0) continue;
        d.writeLong(sendUs[i]);
        d.writeInt(latencyUs[i]);
      }
    }
    System.out.printf(
        "RESULT {\"sent\":%d,\"acked\":%d,\"behindMaxMs\":%.3f,\"errors\":%d,\"firstError\":%s}%n",
        sent, acked.get(), behindMaxNs / 1e6, errors.get(), jsonString(firstError.get()));
  }

  static String jsonString(String s) {
    if (s == null) return "null";
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(' ');
      else b.append(c);
    }
    return b.append('"').toString();
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 0) throw new IllegalArgumentException("usage: CleanerLoad fill|steady --bootstrap H:P --topic T ...");
    String mode = args[0];
    for (int i = 1; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "--bootstrap": bootstrap = args[++i]; break;
        case "--topic": topic = args[++i]; break;
        case "--bytes": totalBytes = Long.parseLong(args[++i]); break;
        case "--keys": keys = Integer.parseInt(args[++i]); break;
        case "--value-min": valueMin = Integer.parseInt(args[++i]); break;
        case "--value-max": valueMax = Integer.parseInt(args[++i]); break;
        case "--tombstone-pct": tombstonePct = Double.parseDouble(args[++i]); break;
        case "--compression": compression = args[++i]; break;
        case "--batch-size": batchSize = Integer.parseInt(args[++i]); break;
        case "--linger-ms": lingerMs = Integer.parseInt(args[++i]); break;
        case "--seed": seed = Long.parseLong(args[++i]); break;
        case "--rate": rate = Double.parseDouble(args[++i]); break;
        case "--record-size": recordSize = Integer.parseInt(args[++i]); break;
        case "--max-duration": maxDurationS = Double.parseDouble(args[++i]); break;
        case "--out": out = args[++i]; break;
        case "--stop-file": stopFile = args[++i]; break;
        default: throw new IllegalArgumentException("unknown argument " + a);
      }
    }
    if (bootstrap == null || topic == null) throw new IllegalArgumentException("--bootstrap and --topic are required");
    if (valueMin < 64 || valueMax < valueMin || valueMax > (4 << 20)) throw new IllegalArgumentException("need 64 <= --value-min <= --value-max <= 4 MiB");
    switch (mode) {
      case "fill": fill(); break;
      case "steady": steady(); break;
      default: throw new IllegalArgumentException("unknown mode " + mode);
    }
  }
}
