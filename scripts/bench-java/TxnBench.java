/*
 * The load tool of scripts/bench-transactions.ts: transactional producers (Apache Kafka's Java client, the
 * same jars for both brokers) and, optionally, one read_committed consumer, in one JVM. Compiled at run time
 * by the script into .cache/bench-java/ against .cache/apache-kafka-<version>/libs/*. Not a test.
 *
 *   java -cp <classes>:<libs>/* TxnBench --bootstrap H:P --topic T --partitions 16 --producers N
 *        --duration S --warmup S [--records-per-txn 10] [--record-size 1024] [--consumer]
 *        [--id-prefix P] [--drain-timeout S] [--client-config FILE] [--txn-rate R]
 *
 * --txn-rate: R transactions per second in all, each producer starting its transactions on its own fixed
 * schedule (R / producers per second, the producers' schedules spread over one period), so that two brokers
 * are compared at the same offered load; a producer that falls behind starts the next one at once, and the
 * schedule is never made up later (what the broker could not take shows as fewer transactions per second).
 * Without it each producer starts the next transaction as soon as the last one committed (a closed loop).
 *
 * --client-config: a properties file every client gets first (e.g. security.protocol=SSL and the ssl.* keys).
 *
 * Every producer thread has its own transactional.id (<prefix>-<i>) and runs, for warmup + duration seconds:
 *   beginTransaction(); send() x records-per-txn; flush(); commitTransaction();
 * with record j of the transaction going to partition (txn * records-per-txn + j) % partitions, so a
 * transaction of 10 records touches 10 of the 16 partitions. flush() (the records' Produce round trip) is
 * timed apart from commitTransaction(), which then is the EndTxn round trip as the client sees it (plus, for
 * transaction version 1, nothing else: the partitions were added to the transaction before the sends
 * completed). Everything else is the Java producer's default (acks=all, idempotence on, linger.ms=5, ...).
 *
 * Commit-to-visible: just before commitTransaction() the producer stores the commit's start time (nanoTime)
 * under the id of the transaction's last record (producer index, transaction number in its value); the
 * consumer thread (isolation.level=read_committed, all partitions assigned, positioned at the end before the
 * producers start) looks the id up when poll() returns that record: now - start is the time from the
 * commitTransaction() call until the transaction is visible to a read_committed reader. Same JVM, same clock.
 *
 * Only transactions whose commit started and ended inside the measured window (after the warm-up) count for
 * transactions/s and the latencies. After the producers stop, the consumer drains until it has seen every
 * record of every committed transaction (or --drain-timeout passes) and checks that it read exactly
 * records-per-txn records per committed transaction.
 *
 * Output: progress lines, then one line "RESULT {json}".
 */
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.time.Duration;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnBench {
  static String bootstrap;
  /** --client-config: properties given to the producers and the consumer (security.protocol, ssl.*), before the tool's own. */
  static final Properties clientConfig = new Properties();
  static String topic;
  static int partitions = 16;
  static int producers = 1;
  static double durationS = 20;
  /** Transactions per second over all producers; 0: a closed loop. */
  static double txnRate = 0;
  static double warmupS = 5;
  static int recordsPerTxn = 10;
  static int recordSize = 1024;
  static boolean withConsumer = false;
  static String idPrefix = "bench-txn";
  static double drainTimeoutS = 15;

  /** (producer index << 40 | transaction number) -> nanoTime at the commitTransaction() call. */
  static final ConcurrentHashMap<Long, Long> commitStarts = new ConcurrentHashMap<>();
  static volatile long measureStartNs;
  static volatile long measureEndNs;
  static volatile boolean stopProducers = false;
  static volatile boolean stopConsumer = false;
  static final AtomicLong committedTotal = new AtomicLong();
  static final AtomicLong committedMeasured = new AtomicLong();
  static final AtomicLong abortedTotal = new AtomicLong();
  static final AtomicReference<String> firstError = new AtomicReference<>();
  static final AtomicLong errors = new AtomicLong();

  /** A growable array of longs (latencies in ns). */
  static final class Samples {
    long[] a = new long[1 << 12];
    int n = 0;
    void add(long v) {
      if (n == a.length) a = Arrays.copyOf(a, n * 2);
      a[n++] = v;
    }
    static long[] merge(List<Samples> all) {
      int total = 0;
      for (Samples s : all) total += s.n;
      long[] out = new long[total];
      int o = 0;
      for (Samples s : all) {
        System.arraycopy(s.a, 0, out, o, s.n);
        o += s.n;
      }
      Arrays.sort(out);
      return out;
    }
  }

  static void fail(String where, Throwable t) {
    errors.incrementAndGet();
    String msg = where + ": " + t.getClass().getName() + ": " + t.getMessage();
    if (firstError.compareAndSet(null, msg)) {
      System.out.println("error " + msg);
      System.out.flush();
    }
  }

  static final class ProducerThread extends Thread {
    final int index;
    final CountDownLatch ready;
    final CountDownLatch go;
    final Samples commitNs = new Samples();
    final Samples flushNs = new Samples();
    volatile boolean initOk = false;

    ProducerThread(int index, CountDownLatch ready, CountDownLatch go) {
      super("txn-producer-" + index);
      this.index = index;
      this.ready = ready;
      this.go = go;
    }

    @Override
    public void run() {
      Properties p = new Properties();
      p.putAll(clientConfig);
      p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, idPrefix + "-" + index);
      p.put(ProducerConfig.CLIENT_ID_CONFIG, "txn-bench-" + index);
      p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
      p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
      KafkaProducer<byte[], byte[]> producer = null;
      try {
        producer = new KafkaProducer<>(p);
        producer.initTransactions();
        initOk = true;
      } catch (Throwable t) {
        fail("producer " + index + " initTransactions", t);
      }
      ready.countDown();
      try {
        go.await();
      } catch (InterruptedException e) {
        return;
      }
      if (!initOk) {
        if (producer != null) producer.close(Duration.ofSeconds(5));
        return;
      }
      long txn = 0;
      long periodNs = txnRate > 0 ? (long) (1e9 * producers / txnRate) : 0;
      long nextStartNs = System.nanoTime() + (periodNs * index) / Math.max(1, producers);
      byte[][] values = new byte[recordsPerTxn][];
      for (int j = 0; j < recordsPerTxn; j++) values[j] = new byte[recordSize];
      try {
        while (!stopProducers) {
          if (periodNs > 0) {
            long waitNs = nextStartNs - System.nanoTime();
            if (waitNs > 0) java.util.concurrent.locks.LockSupport.parkNanos(waitNs);
            // Behind schedule: start now, and do not make the missed starts up later.
            nextStartNs = Math.max(nextStartNs + periodNs, System.nanoTime());
          }
          producer.beginTransaction();
          long id = ((long) index << 40) | txn;
          for (int j = 0; j < recordsPerTxn; j++) {
            // A fresh array per record: the producer keeps a reference until the batch is sent.
            byte[] v = values[j].clone();
            ByteBuffer b = ByteBuffer.wrap(v);
            b.put((byte) (j == recordsPerTxn - 1 ? 1 : 0)); // 1: the transaction's last record
            b.putLong(id);
            int partition = (int) ((txn * recordsPerTxn + j) % partitions);
            producer.send(new ProducerRecord<>(topic, partition, null, v));
          }
          long f0 = System.nanoTime();
          producer.flush();
          long t0 = System.nanoTime();
          if (withConsumer) commitStarts.put(id, t0);
          producer.commitTransaction();
          long t1 = System.nanoTime();
          committedTotal.incrementAndGet();
          if (t0 >= measureStartNs && t1 <= measureEndNs) {
            committedMeasured.incrementAndGet();
            commitNs.add(t1 - t0);
            flushNs.add(t0 - f0);
          }
          txn++;
        }
      } catch (Throwable t) {
        fail("producer " + index + " transaction " + txn, t);
        try {
          producer.abortTransaction();
          abortedTotal.incrementAndGet();
        } catch (Throwable ignored) {
          // fenced or fatal: nothing more to do
        }
      } finally {
        producer.close(Duration.ofSeconds(10));
      }
    }
  }

  static final class ConsumerThread extends Thread {
    final CountDownLatch ready;
    final Samples visibleNs = new Samples();
    volatile long records = 0;
    volatile long lastRecords = 0;
    long lateLookups = 0;

    ConsumerThread(CountDownLatch ready) {
      super("txn-consumer");
      this.ready = ready;
    }

    @Override
    public void run() {
      Properties p = new Properties();
      p.putAll(clientConfig);
      p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
      p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
      p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest");
      p.put(ConsumerConfig.CLIENT_ID_CONFIG, "txn-bench-consumer");
      p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
      try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
        consumer.assign(tps);
        consumer.seekToEnd(tps);
        for (TopicPartition tp : tps) consumer.position(tp, Duration.ofSeconds(30)); // resolve before any producer starts
        ready.countDown();
        while (!stopConsumer) {
          ConsumerRecords<byte[], byte[]> polled = consumer.poll(Duration.ofMillis(100));
          long now = System.nanoTime();
          for (ConsumerRecord<byte[], byte[]> r : polled) {
            records++;
            byte[] v = r.value();
            if (v == null || v.length < 9 || v[0] != 1) continue;
            lastRecords++;
            long id = ByteBuffer.wrap(v, 1, 8).getLong();
            Long start = commitStarts.remove(id);
            if (start == null) {
              lateLookups++; // cannot happen: the start is stored before the commit begins
              continue;
            }
            if (start >= measureStartNs && start <= measureEndNs) visibleNs.add(now - start);
          }
        }
      } catch (Throwable t) {
        fail("consumer", t);
        ready.countDown();
      }
    }
  }

  static double ms(long ns) {
    return ns / 1e6;
  }

  static String pct(long[] sorted, double p) {
    if (sorted.length == 0) return "null";
    int i = (int) Math.min(sorted.length - 1, Math.max(0, Math.ceil(p / 100.0 * sorted.length) - 1));
    return String.format("%.3f", ms(sorted[i]));
  }

  static String dist(long[] s) {
    if (s.length == 0) return "{\"n\":0}";
    long sum = 0;
    for (long v : s) sum += v;
    return String.format(
        "{\"n\":%d,\"p50\":%s,\"p90\":%s,\"p99\":%s,\"p999\":%s,\"max\":%s,\"avg\":%.3f}",
        s.length, pct(s, 50), pct(s, 90), pct(s, 99), pct(s, 99.9), pct(s, 100), ms(sum / s.length));
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
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "--bootstrap": bootstrap = args[++i]; break;
        case "--topic": topic = args[++i]; break;
        case "--partitions": partitions = Integer.parseInt(args[++i]); break;
        case "--producers": producers = Integer.parseInt(args[++i]); break;
        case "--duration": durationS = Double.parseDouble(args[++i]); break;
        case "--txn-rate": txnRate = Double.parseDouble(args[++i]); break;
        case "--warmup": warmupS = Double.parseDouble(args[++i]); break;
        case "--records-per-txn": recordsPerTxn = Integer.parseInt(args[++i]); break;
        case "--record-size": recordSize = Integer.parseInt(args[++i]); break;
        case "--consumer": withConsumer = true; break;
        case "--id-prefix": idPrefix = args[++i]; break;
        case "--drain-timeout": drainTimeoutS = Double.parseDouble(args[++i]); break;
        case "--client-config":
          try (java.io.FileReader r = new java.io.FileReader(args[++i])) {
            clientConfig.load(r);
          }
          break;
        default: throw new IllegalArgumentException("unknown argument " + a);
      }
    }
    if (bootstrap == null || topic == null) throw new IllegalArgumentException("--bootstrap and --topic are required");
    if (recordSize < 9) throw new IllegalArgumentException("--record-size must be >= 9");
    measureStartNs = Long.MAX_VALUE;
    measureEndNs = Long.MAX_VALUE;

    ConsumerThread consumer = null;
    if (withConsumer) {
      CountDownLatch consumerReady = new CountDownLatch(1);
      consumer = new ConsumerThread(consumerReady);
      consumer.start();
      consumerReady.await();
      System.out.println("consumer positioned at the end of " + partitions + " partitions");
    }

    CountDownLatch ready = new CountDownLatch(producers);
    CountDownLatch go = new CountDownLatch(1);
    List<ProducerThread> threads = new ArrayList<>();
    long initStart = System.nanoTime();
    for (int i = 0; i < producers; i++) {
      ProducerThread t = new ProducerThread(i, ready, go);
      threads.add(t);
      t.start();
    }
    ready.await();
    long initNs = System.nanoTime() - initStart;
    int initOk = 0;
    for (ProducerThread t : threads) if (t.initOk) initOk++;
    System.out.printf("%d of %d producers initialized (initTransactions) in %.0f ms%n", initOk, producers, ms(initNs));
    System.out.flush();

    long begin = System.nanoTime();
    measureStartNs = begin + (long) (warmupS * 1e9);
    measureEndNs = measureStartNs + (long) (durationS * 1e9);
    go.countDown();
    long lastCount = 0;
    long lastT = begin;
    while (true) {
      long now = System.nanoTime();
      if (now >= measureEndNs) break;
      boolean anyAlive = false;
      for (ProducerThread t : threads) anyAlive |= t.isAlive();
      if (!anyAlive) break;
      Thread.sleep(Math.min(5000, Math.max(1, (measureEndNs - now) / 1_000_000)));
      long c = committedTotal.get();
      long t = System.nanoTime();
      System.out.printf("t=%.0fs %s: %.0f transactions/s (%d committed so far)%n",
          (t - begin) / 1e9, t < measureStartNs ? "warm-up" : "measuring", (c - lastCount) * 1e9 / (t - lastT), c);
      System.out.flush();
      lastCount = c;
      lastT = t;
    }
    long measuredEnd = Math.min(System.nanoTime(), measureEndNs);
    stopProducers = true;
    for (ProducerThread t : threads) t.join(60_000);

    long committed = committedTotal.get();
    long drainMs = 0;
    if (consumer != null) {
      long d0 = System.nanoTime();
      long deadline = d0 + (long) (drainTimeoutS * 1e9);
      // Every record, not only every transaction's last: with several brokers a transaction's markers land
      // partition by partition, so its last record can be visible before its others are.
      long expected = committed * recordsPerTxn;
      while (consumer.isAlive() && (consumer.lastRecords < committed || consumer.records < expected) && System.nanoTime() < deadline) Thread.sleep(20);
      drainMs = (System.nanoTime() - d0) / 1_000_000;
      stopConsumer = true;
      consumer.join(30_000);
    }

    List<Samples> commits = new ArrayList<>();
    List<Samples> flushes = new ArrayList<>();
    for (ProducerThread t : threads) {
      commits.add(t.commitNs);
      flushes.add(t.flushNs);
    }
    long[] commitSorted = Samples.merge(commits);
    long[] flushSorted = Samples.merge(flushes);
    long[] visibleSorted = consumer == null ? new long[0] : Samples.merge(List.of(consumer.visibleNs));
    double windowS = Math.max(1e-9, (measuredEnd - measureStartNs) / 1e9);
    StringBuilder json = new StringBuilder("{");
    json.append("\"producers\":").append(producers);
    json.append(",\"producersInitialized\":").append(initOk);
    json.append(String.format(",\"initMs\":%.1f", ms(initNs)));
    json.append(String.format(",\"windowS\":%.3f", windowS));
    json.append(",\"committedMeasured\":").append(committedMeasured.get());
    json.append(",\"committedTotal\":").append(committed);
    json.append(",\"aborted\":").append(abortedTotal.get());
    json.append(String.format(",\"txnPerSec\":%.2f", committedMeasured.get() / windowS));
    json.append(",\"commitMs\":").append(dist(commitSorted));
    json.append(",\"flushMs\":").append(dist(flushSorted));
    if (consumer != null) {
      json.append(",\"visibleMs\":").append(dist(visibleSorted));
      json.append(",\"consumedRecords\":").append(consumer.records);
      json.append(",\"consumedLastRecords\":").append(consumer.lastRecords);
      json.append(",\"lateLookups\":").append(consumer.lateLookups);
      json.append(",\"drainMs\":").append(drainMs);
    }
    json.append(",\"errors\":").append(errors.get());
    json.append(",\"firstError\":").append(jsonString(firstError.get()));
    json.append("}");
    System.out.println("RESULT " + json);
    System.out.flush();
    System.exit(0);
  }
}
