import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The client of the Jepsen-style workload (tests/support/jepsen/harness.ts): one transactional producer and one
 * read_committed consumer, issuing transactions that mix sends and polls, and printing its history as JSON lines
 * on stdout (the format is tests/support/jepsen/history.ts).
 *
 *   java JepsenWorkload create <bootstrap> <topic>:<partitions> ...      creates the topics, prints CREATED
 *   java JepsenWorkload run <bootstrap> <process> <lineage> <lineages> <seed> <topics> <partitions> <keysPerPartition> [shared]
 *   java JepsenWorkload fence <bootstrap> <lineage>                        initTransactions once, then exits
 *   java JepsenWorkload final <bootstrap> <topics> <partitions> <timeoutMs> reads every partition from 0 to its end
 *
 * run: the lineage is the transactional.id ("jepsen-<lineage>") and the consumer group ("jepsen-<lineage>"); a new
 * process of a lineage fences the previous one and resumes from the offsets its committed transactions carried.
 * Lineage L writes the partitions p with p % lineages == L of every topic (one writer per partition: see
 * docs/checker.md for why; with "shared", every lineage writes every partition), through keysPerPartition keys each, and reads every partition (assign, no rebalances).
 * Each value is "<process>-<n>", unique across the run. A transaction is 1-4 micro-ops, each a send (waited for:
 * its offset is recorded) or a poll; then the consumer's positions go into the transaction
 * (sendOffsetsToTransaction; the completion line lists them as "offsets") and it commits, or, one in ten, aborts
 * on purpose ("fail", error "planned abort"; then the group's committed offsets are read back: a "committed"
 * line). Any exception: abortTransaction; the op is "fail" when that abort
 * returned, "info" (may or may not have committed) when it threw, and then the producer is closed and a new one
 * initialised (which settles the open transaction). After a fail or info the consumer seeks back to where the
 * transaction started, and says so with a "seek" line. Stops after a line "STOP" on stdin (or its end).
 */
public class JepsenWorkload {
  static final Object out = new Object();

  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "create": create(args); break;
      case "run": new JepsenWorkload(args).run(); break;
      case "fence": fence(args[1], Integer.parseInt(args[2])); break;
      case "final": finalRead(args[1], args[2].split(","), Integer.parseInt(args[3]), Long.parseLong(args[4])); break;
      default: throw new IllegalArgumentException("unknown mode " + args[0]);
    }
    System.exit(0);
  }

  // -------------------------------------------------------------------------------------------
  // JSON (the strings here are topic names, keys, values and exception messages)

  static String q(String s) {
    if (s == null) return "null";
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }

  static void emit(String json) {
    synchronized (out) {
      System.out.println(json);
      System.out.flush();
    }
  }

  static Properties clientProps(String bootstrap) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    // Short timeouts, so that a fault ends the transaction it hits within seconds.
    props.put("request.timeout.ms", "3000");
    props.put("reconnect.backoff.max.ms", "200");
    props.put("retry.backoff.max.ms", "200");
    return props;
  }

  // -------------------------------------------------------------------------------------------
  // create, fence, final

  static void create(String[] args) throws Exception {
    Properties props = clientProps(args[1]);
    props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    try (Admin admin = Admin.create(props)) {
      List<NewTopic> topics = new ArrayList<>();
      for (int i = 2; i < args.length; i++) {
        String[] parts = args[i].split(":");
        topics.add(new NewTopic(parts[0], Integer.parseInt(parts[1]), (short) 1));
      }
      admin.createTopics(topics).all().get();
      System.out.println("CREATED");
    }
  }

  static Properties producerProps(String bootstrap, int lineage) {
    Properties props = clientProps(bootstrap);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "jepsen-" + lineage);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "6000");
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "5000");
    props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "10000");
    return props;
  }

  /** A new producer on the lineage's transactional id fences the old one and settles its open transaction. */
  static void fence(String bootstrap, int lineage) {
    for (int attempt = 0; ; attempt++) {
      KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(bootstrap, lineage));
      try {
        producer.initTransactions();
        producer.close(Duration.ofSeconds(5));
        System.out.println("FENCED");
        return;
      } catch (Exception e) {
        producer.close(Duration.ZERO);
        if (attempt >= 20) throw e;
      }
    }
  }

  /** A consumer of the final read: assigned partitions, no group commits, at the given isolation level. */
  static Properties finalReaderProps(String bootstrap, String isolationLevel) {
    Properties props = clientProps(bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolationLevel);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    return props;
  }

  static void finalRead(String bootstrap, String[] topics, int partitions, long timeoutMs) throws Exception {
    long deadline = System.currentTimeMillis() + timeoutMs;
    Properties props = finalReaderProps(bootstrap, "read_committed");
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (String t : topics) for (int p = 0; p < partitions; p++) tps.add(new TopicPartition(t, p));
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> ends = settledEnds(bootstrap, consumer, tps, deadline);
      while (true) {
        boolean reached = true;
        for (TopicPartition tp : tps) if (consumer.position(tp) < ends.get(tp)) reached = false;
        if (reached) break;
        if (System.currentTimeMillis() > deadline) {
          for (TopicPartition tp : tps) emit("{\"type\":\"final-timeout\",\"topic\":" + q(tp.topic()) + ",\"partition\":" + tp.partition() + ",\"end\":" + ends.get(tp) + ",\"position\":" + consumer.position(tp) + "}");
          System.exit(2);
        }
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          emit("{\"type\":\"final\",\"topic\":" + q(r.topic()) + ",\"partition\":" + r.partition() + ",\"offset\":" + r.offset() + ",\"key\":" + q(r.key()) + ",\"value\":" + q(r.value()) + "}");
        }
      }
      for (TopicPartition tp : tps) emit("{\"type\":\"final-end\",\"topic\":" + q(tp.topic()) + ",\"partition\":" + tp.partition() + ",\"end\":" + ends.get(tp) + "}");
    }
  }

  /**
   * The ends to read to: the last stable offsets once they equal the high watermarks, that is once no
   * transaction is open on any partition. Every writer has ended, but a transaction whose EndTxn was answered
   * may still have its markers on the way (the coordinator answers at the durable decision, as Apache Kafka's
   * does), and until they land its records lie at or past the LSO. Prints a "final-settled" line with how long
   * that took and which partitions were open at first; a partition still open at the deadline is printed as
   * "final-open" and the read fails (exit 3): a marker that never comes is an anomaly, not a wait.
   */
  static Map<TopicPartition, Long> settledEnds(String bootstrap, KafkaConsumer<String, String> committed, List<TopicPartition> tps, long deadline) throws Exception {
    Properties props = finalReaderProps(bootstrap, "read_uncommitted");
    long startedMs = System.currentTimeMillis();
    List<String> openAtFirst = null;
    try (KafkaConsumer<String, String> uncommitted = new KafkaConsumer<>(props)) {
      while (true) {
        // High watermarks first: a marker landing between the two reads can only make the LSO look later.
        Map<TopicPartition, Long> high = uncommitted.endOffsets(tps);
        Map<TopicPartition, Long> stable = committed.endOffsets(tps);
        List<String> open = new ArrayList<>();
        for (TopicPartition tp : tps) {
          if (stable.get(tp) < high.get(tp)) open.add("{\"topic\":" + q(tp.topic()) + ",\"partition\":" + tp.partition() + ",\"stable\":" + stable.get(tp) + ",\"high\":" + high.get(tp) + "}");
        }
        if (openAtFirst == null) openAtFirst = open;
        if (open.isEmpty()) {
          emit("{\"type\":\"final-settled\",\"waitedMs\":" + (System.currentTimeMillis() - startedMs) + ",\"openAtFirst\":[" + String.join(",", openAtFirst) + "]}");
          return stable;
        }
        if (System.currentTimeMillis() > deadline) {
          for (String o : open) emit("{\"type\":\"final-open\"," + o.substring(1));
          System.exit(3);
        }
        Thread.sleep(50);
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // run

  final String bootstrap;
  final int process;
  final int lineage;
  final Random rng;
  final List<TopicPartition> all = new ArrayList<>();
  final List<String[]> keys = new ArrayList<>(); // {topic, partition, key}
  volatile boolean stop = false;
  KafkaProducer<String, String> producer;
  KafkaConsumer<String, String> consumer;
  int txn = 0;
  int nextValue = 0;

  JepsenWorkload(String[] args) {
    bootstrap = args[1];
    process = Integer.parseInt(args[2]);
    lineage = Integer.parseInt(args[3]);
    int lineages = Integer.parseInt(args[4]);
    rng = new Random(Long.parseLong(args[5]) * 1_000_003L + process);
    String[] topics = args[6].split(",");
    int partitions = Integer.parseInt(args[7]);
    int keysPerPartition = Integer.parseInt(args[8]);
    boolean shared = args.length > 9 && args[9].equals("shared");
    for (String t : topics) {
      for (int p = 0; p < partitions; p++) {
        all.add(new TopicPartition(t, p));
        if (!shared && p % lineages != lineage) continue;
        for (int k = 0; k < keysPerPartition; k++) keys.add(new String[] {t, String.valueOf(p), "k-" + t + "-" + p + "-" + k});
      }
    }
  }

  long now() {
    return System.currentTimeMillis();
  }

  void run() throws Exception {
    Thread stdin = new Thread(() -> {
      try {
        BufferedReader r = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = r.readLine()) != null; ) if (line.trim().equals("STOP")) break;
      } catch (Exception e) {
        // stdin gone: stop too
      }
      stop = true;
    });
    stdin.setDaemon(true);
    stdin.start();

    Properties cprops = clientProps(bootstrap);
    cprops.put(ConsumerConfig.GROUP_ID_CONFIG, "jepsen-" + lineage);
    cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    cprops.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cprops.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cprops.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "5000");
    cprops.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "50");
    cprops.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    cprops.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    consumer = new KafkaConsumer<>(cprops);
    consumer.assign(all);
    emit("{\"type\":\"start\",\"process\":" + process + ",\"lineage\":" + lineage + ",\"time\":" + now() + "}");

    // The producer first: its initTransactions settles the transaction a killed predecessor left open, whose
    // offsets would keep the group's committed offsets unstable (and the positions below unknown) until then.
    while (producer == null && !stop) initProducer();
    // The positions to start from: the offsets the lineage's committed transactions carried (or 0).
    Map<TopicPartition, Long> positions = null;
    while (positions == null && !stop) {
      try {
        positions = new HashMap<>();
        for (TopicPartition tp : all) positions.put(tp, consumer.position(tp));
      } catch (Exception e) {
        positions = null;
      }
    }
    if (positions != null) emitSeek(positions);

    while (!stop) {
      if (producer == null && !initProducer()) continue;
      transaction();
    }
    if (producer != null) producer.close(Duration.ofSeconds(5));
    consumer.close(Duration.ofSeconds(5));
    emit("{\"type\":\"stop\",\"process\":" + process + ",\"time\":" + now() + "}");
  }

  boolean initProducer() {
    KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(bootstrap, lineage));
    try {
      p.initTransactions();
      producer = p;
      emit("{\"type\":\"producer\",\"process\":" + process + ",\"time\":" + now() + "}");
      return true;
    } catch (Exception e) {
      p.close(Duration.ZERO);
      return false;
    }
  }

  void emitSeek(Map<TopicPartition, Long> positions) {
    StringBuilder b = new StringBuilder("{\"type\":\"seek\",\"process\":" + process + ",\"time\":" + now() + ",\"positions\":[");
    boolean first = true;
    for (TopicPartition tp : all) {
      if (!first) b.append(',');
      first = false;
      b.append("{\"topic\":").append(q(tp.topic())).append(",\"partition\":").append(tp.partition()).append(",\"offset\":").append(positions.get(tp)).append('}');
    }
    emit(b.append("]}").toString());
  }

  /** One planned micro-op and, once done, its result (as JSON). */
  static final class Micro {
    String[] send; // {topic, partition, key, value}; null for a poll
    String result; // JSON of the completed micro-op, null until done
  }

  static String sendJson(String[] s, Long offset) {
    return "{\"f\":\"send\",\"topic\":" + q(s[0]) + ",\"partition\":" + s[1] + ",\"key\":" + q(s[2]) + ",\"value\":" + q(s[3]) + (offset == null ? "" : ",\"offset\":" + offset) + "}";
  }

  static String opsJson(List<Micro> ops, boolean results) {
    StringBuilder b = new StringBuilder("[");
    boolean first = true;
    for (Micro m : ops) {
      if (results && m.result == null) continue;
      if (!first) b.append(',');
      first = false;
      if (results) b.append(m.result);
      else b.append(m.send != null ? sendJson(m.send, null) : "{\"f\":\"poll\"}");
    }
    return b.append(']').toString();
  }

  void transaction() {
    int id = txn++;
    List<Micro> ops = new ArrayList<>();
    int n = 1 + rng.nextInt(4);
    // One in ten ends in abortTransaction on purpose: aborted records in every run, for the checker's
    // aborted-read and committed-offsets checks (faults alone abort few).
    boolean plannedAbort = rng.nextInt(10) == 0;
    for (int i = 0; i < n; i++) {
      Micro m = new Micro();
      if (rng.nextBoolean()) {
        String[] k = keys.get(rng.nextInt(keys.size()));
        m.send = new String[] {k[0], k[1], k[2], process + "-" + (nextValue++)};
      }
      ops.add(m);
    }
    Map<TopicPartition, Long> start = new HashMap<>();
    for (TopicPartition tp : all) start.put(tp, consumer.position(tp));
    String head = "\"process\":" + process + ",\"txn\":" + id;
    emit("{\"type\":\"invoke\"," + head + ",\"time\":" + now() + ",\"ops\":" + opsJson(ops, false) + "}");
    String step = "begin";
    String carried = ""; // the offsets the transaction carries, once sendOffsetsToTransaction was reached
    try {
      producer.beginTransaction();
      for (Micro m : ops) {
        if (m.send != null) {
          step = "send";
          RecordMetadata md = producer.send(new ProducerRecord<>(m.send[0], Integer.parseInt(m.send[1]), m.send[2], m.send[3])).get();
          m.result = sendJson(m.send, md.offset());
        } else {
          step = "poll";
          StringBuilder b = new StringBuilder("{\"f\":\"poll\",\"records\":[");
          boolean first = true;
          for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
            if (!first) b.append(',');
            first = false;
            b.append("{\"topic\":").append(q(r.topic())).append(",\"partition\":").append(r.partition()).append(",\"offset\":").append(r.offset())
                .append(",\"key\":").append(q(r.key())).append(",\"value\":").append(q(r.value())).append('}');
          }
          m.result = b.append("]}").toString();
        }
      }
      step = "offsets";
      Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
      StringBuilder ob = new StringBuilder(",\"offsets\":[");
      for (TopicPartition tp : all) {
        long position = consumer.position(tp);
        if (!offsets.isEmpty()) ob.append(',');
        offsets.put(tp, new OffsetAndMetadata(position));
        ob.append("{\"topic\":").append(q(tp.topic())).append(",\"partition\":").append(tp.partition()).append(",\"offset\":").append(position).append('}');
      }
      carried = ob.append(']').toString();
      producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
      if (plannedAbort) {
        step = "abort";
        producer.abortTransaction();
        emit("{\"type\":\"fail\"," + head + ",\"time\":" + now() + ",\"ops\":" + opsJson(ops, true) + carried + ",\"error\":\"planned abort\"}");
        emitCommitted();
        rewind(start);
        return;
      }
      step = "commit";
      producer.commitTransaction();
      emit("{\"type\":\"ok\"," + head + ",\"time\":" + now() + ",\"ops\":" + opsJson(ops, true) + carried + "}");
    } catch (Exception e) {
      boolean aborted = false;
      try {
        producer.abortTransaction();
        aborted = true;
      } catch (Exception again) {
        // The outcome is unknown: a new producer on the same transactional id settles it.
      }
      String error = step + ": " + e.getClass().getName() + ": " + String.valueOf(e.getMessage());
      emit("{\"type\":\"" + (aborted ? "fail" : "info") + "\"," + head + ",\"time\":" + now() + ",\"ops\":" + opsJson(ops, true) + carried + ",\"error\":" + q(error) + "}");
      if (!aborted) {
        producer.close(Duration.ZERO);
        producer = null;
      }
      rewind(start);
    }
  }

  /**
   * The group's committed offsets, read back after a planned abort: still those of the last committed
   * transaction (the aborted one's are discarded). Left out when the read fails (a fault).
   */
  void emitCommitted() {
    Map<TopicPartition, OffsetAndMetadata> committed;
    try {
      committed = consumer.committed(new java.util.HashSet<>(all), Duration.ofSeconds(5));
    } catch (Exception e) {
      return;
    }
    Map<TopicPartition, Long> offsets = new HashMap<>();
    for (TopicPartition tp : all) offsets.put(tp, committed.get(tp) == null ? 0L : committed.get(tp).offset());
    StringBuilder b = new StringBuilder("{\"type\":\"committed\",\"process\":" + process + ",\"time\":" + now() + ",\"positions\":[");
    boolean first = true;
    for (TopicPartition tp : all) {
      if (!first) b.append(',');
      first = false;
      b.append("{\"topic\":").append(q(tp.topic())).append(",\"partition\":").append(tp.partition()).append(",\"offset\":").append(offsets.get(tp)).append('}');
    }
    emit(b.append("]}").toString());
  }

  /** Back to where the transaction started: what it polled is read again by the next one. */
  void rewind(Map<TopicPartition, Long> start) {
    for (TopicPartition tp : all) consumer.seek(tp, start.get(tp));
    emitSeek(start);
  }
}
