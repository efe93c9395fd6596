import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A transactional Java producer (KafkaProducer with transactional.id) for tests/interop/transactions-java.test.ts
 * and tests/fault/endtxn-answered-crash.test.ts (mode decide).
 *
 *   java TxnProducer <mode> <bootstrap> <topic> <transactionalId> <prefix> <args...> [producer.config=value ...]
 *
 * Modes (every record has key "<prefix>-<txn>-<i>" and the same value; record i goes to partition i % partitions):
 *   batches <partitions> <txns> <perTxn> <abortEvery>  txns transactions; transaction t is aborted when
 *                                                      abortEvery > 0 and t % abortEvery == abortEvery - 1,
 *                                                      committed otherwise. Prints COMMITTED t / ABORTED t.
 *   zombie <n>        begins, sends n records to partition 0, flushes, prints OPEN, waits for a line on stdin,
 *                     then sends one more record, commits, and (if that failed) aborts, printing every
 *                     exception as EXCEPTION <step> <class> (and its causes as CAUSE <class>).
 *   hang <n>          begins, sends n records to partition 0, flushes, prints OPEN and sleeps forever (the test
 *                     kills it with SIGKILL).
 *   once <n> <commit|abort> [<group> <offset>]  one transaction of n records to partition 0 (with the group's
 *                     offset of the topic's partition 0 when a group is given: sendOffsetsToTransaction, as a
 *                     copier does); prints OPEN, waits for a line on stdin, then commits or aborts and prints
 *                     COMMITTED 0 / ABORTED 0 with the milliseconds the EndTxn took (retries across a broker
 *                     restart included).
 *   decide <partitions> <n> <commit|abort> [<group> <offset>]  one transaction of n records over the partitions
 *                     (a count: 0 .. count-1; or a comma-separated list such as 1,4 or 4,)
 *                     (with the group's offset + p for every partition p when a group is given:
 *                     sendOffsetsToTransaction), then commits or aborts at once and prints COMMITTED 0 /
 *                     ABORTED 0 with the milliseconds the EndTxn took, as soon as it returned.
 * Prints READY after initTransactions, and DONE at the end. Any unexpected exception: FAILED <class> <message>, exit 1.
 */
public class TxnProducer {
  public static void main(String[] args) throws Exception {
    String mode = args[0];
    String bootstrap = args[1];
    String topic = args[2];
    String transactionalId = args[3];
    String prefix = args[4];
    List<String> rest = new ArrayList<>();
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    for (int i = 5; i < args.length; i++) {
      int eq = args[i].indexOf('=');
      if (eq > 0 && args[i].contains(".")) props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
      else rest.add(args[i]);
    }
    KafkaProducer<String, String> producer = new KafkaProducer<>(props);
    try {
      producer.initTransactions();
      say("READY");
      switch (mode) {
        case "batches": batches(producer, topic, prefix, rest); break;
        case "zombie": zombie(producer, topic, prefix, Integer.parseInt(rest.get(0))); break;
        case "hang": hang(producer, topic, prefix, Integer.parseInt(rest.get(0))); break;
        case "decide": decide(producer, topic, prefix, rest); break;
        case "once": once(producer, topic, prefix, Integer.parseInt(rest.get(0)), rest.get(1), rest.size() > 3 ? rest.get(2) : null, rest.size() > 3 ? Long.parseLong(rest.get(3)) : -1); break;
        default: throw new IllegalArgumentException("unknown mode " + mode);
      }
      say("DONE");
    } catch (Exception e) {
      say("FAILED " + e.getClass().getName() + " " + e.getMessage());
      e.printStackTrace();
      System.exit(1);
    }
    // close() of a fenced producer may wait for nothing in particular: bounded.
    producer.close(java.time.Duration.ofSeconds(5));
  }

  static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static List<Future<RecordMetadata>> send(KafkaProducer<String, String> producer, String topic, int partitions, String prefix, int txn, int n) {
    return sendTo(producer, topic, java.util.stream.IntStream.range(0, partitions).toArray(), prefix, txn, n);
  }

  /** Record i to partitions[i % partitions.length]. */
  static List<Future<RecordMetadata>> sendTo(KafkaProducer<String, String> producer, String topic, int[] partitions, String prefix, int txn, int n) {
    List<Future<RecordMetadata>> futures = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String key = prefix + "-" + txn + "-" + i;
      futures.add(producer.send(new ProducerRecord<>(topic, partitions[i % partitions.length], key, key)));
    }
    return futures;
  }

  /** "3": partitions 0, 1 and 2; "1,4": partitions 1 and 4. */
  static int[] partitionsOf(String arg) {
    if (!arg.contains(",")) return java.util.stream.IntStream.range(0, Integer.parseInt(arg)).toArray();
    return java.util.Arrays.stream(arg.split(",")).mapToInt(Integer::parseInt).toArray();
  }

  static void batches(KafkaProducer<String, String> producer, String topic, String prefix, List<String> rest) throws Exception {
    int partitions = Integer.parseInt(rest.get(0));
    int txns = Integer.parseInt(rest.get(1));
    int perTxn = Integer.parseInt(rest.get(2));
    int abortEvery = Integer.parseInt(rest.get(3));
    for (int t = 0; t < txns; t++) {
      producer.beginTransaction();
      List<Future<RecordMetadata>> futures = send(producer, topic, partitions, prefix, t, perTxn);
      producer.flush();
      for (Future<RecordMetadata> f : futures) f.get();
      if (abortEvery > 0 && t % abortEvery == abortEvery - 1) {
        producer.abortTransaction();
        say("ABORTED " + t);
      } else {
        producer.commitTransaction();
        say("COMMITTED " + t);
      }
    }
  }

  static void report(String step, Throwable e) {
    say("EXCEPTION " + step + " " + e.getClass().getName() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
    for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) say("CAUSE " + step + " " + c.getClass().getName());
  }

  static void zombie(KafkaProducer<String, String> producer, String topic, String prefix, int n) throws Exception {
    producer.beginTransaction();
    for (Future<RecordMetadata> f : send(producer, topic, 1, prefix, 0, n)) f.get();
    say("OPEN");
    new BufferedReader(new InputStreamReader(System.in)).readLine();
    boolean failed = false;
    try {
      producer.send(new ProducerRecord<>(topic, 0, prefix + "-0-late", prefix + "-0-late")).get();
      say("SENT late");
    } catch (Exception e) {
      failed = true;
      report("send", e);
    }
    try {
      producer.commitTransaction();
      say("COMMITTED 0");
    } catch (Exception e) {
      failed = true;
      report("commit", e);
    }
    if (failed) {
      try {
        producer.abortTransaction();
        say("ABORTED 0");
      } catch (Exception e) {
        report("abort", e);
      }
    }
  }

  static void hang(KafkaProducer<String, String> producer, String topic, String prefix, int n) throws Exception {
    producer.beginTransaction();
    for (Future<RecordMetadata> f : send(producer, topic, 1, prefix, 0, n)) f.get();
    say("OPEN");
    Thread.sleep(Long.MAX_VALUE);
  }

  static void once(KafkaProducer<String, String> producer, String topic, String prefix, int n, String end, String group, long offset) throws Exception {
    producer.beginTransaction();
    for (Future<RecordMetadata> f : send(producer, topic, 1, prefix, 0, n)) f.get();
    if (group != null) {
      producer.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(offset)), new ConsumerGroupMetadata(group));
    }
    say("OPEN");
    new BufferedReader(new InputStreamReader(System.in)).readLine();
    endTimed(producer, end);
  }

  /** Commits or aborts the open transaction, then prints COMMITTED 0 / ABORTED 0 and the milliseconds it took. */
  static void endTimed(KafkaProducer<String, String> producer, String end) {
    long start = System.nanoTime();
    if (end.equals("commit")) {
      producer.commitTransaction();
      say("COMMITTED 0 " + (System.nanoTime() - start) / 1_000_000);
    } else {
      producer.abortTransaction();
      say("ABORTED 0 " + (System.nanoTime() - start) / 1_000_000);
    }
  }

  static void decide(KafkaProducer<String, String> producer, String topic, String prefix, List<String> rest) throws Exception {
    int[] partitions = partitionsOf(rest.get(0));
    int n = Integer.parseInt(rest.get(1));
    producer.beginTransaction();
    for (Future<RecordMetadata> f : sendTo(producer, topic, partitions, prefix, 0, n)) f.get();
    if (rest.size() > 4) {
      long offset = Long.parseLong(rest.get(4));
      Map<TopicPartition, OffsetAndMetadata> offsets = new java.util.HashMap<>();
      for (int p : partitions) offsets.put(new TopicPartition(topic, p), new OffsetAndMetadata(offset + p));
      producer.sendOffsetsToTransaction(offsets, new ConsumerGroupMetadata(rest.get(3)));
    }
    endTimed(producer, rest.get(2));
  }
}
