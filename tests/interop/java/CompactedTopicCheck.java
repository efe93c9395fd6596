import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Writes and reads compacted topics with the Java clients, for tests/interop/compacted-topics.test.ts.
 *
 *   java CompactedTopicCheck write <bootstrap> <topic[,topic...]> <idPrefix> <planFile>
 *   java CompactedTopicCheck read <bootstrap> <topic> <isolation[,isolation...]> <timeoutMs>
 *
 * write runs a plan, one step a line:
 *   send <producer> <partition> <key> <value>   one record to each topic in turn; value "-" is a tombstone
 *   begin|commit|abort <producer>               a transaction of a transactional producer
 * Producer "P" is an idempotent producer without a transactional id; any other name is a transactional
 * producer with transactional.id "<idPrefix>-<name>", created (initTransactions) at its first step. Every
 * send waits for its acknowledgement before the next step, and every commit or abort waits until its
 * markers are in the log (the high watermark of each partition of the transaction moved past them), so each
 * record is a batch of its own and the order of the log is the order of the plan on any broker. (Apache
 * answers EndTxn once its decision is logged and writes the markers after, so without that wait another
 * producer's next record could land before a marker there and not on a broker that writes them first.) Prints W <topic> <producer> <partition> <offset>
 * <key> per acknowledged record, E <producer> <commit|abort> per finished transaction, then DONE.
 *
 * read reads every partition from the beginning (assign + seekToBeginning, no group) once per isolation
 * level, until each position reached its end offset (the last stable offset under read_committed, the
 * high watermark under read_uncommitted). Per isolation level it prints ISOLATION <level>, END <partition>
 * <endOffset> per partition, R <partition> <offset> <key> <value> per record in the order received (the
 * value as "=<text>", or "-" for a tombstone), then DONE <count>; TIMEOUT and exit 2 when the deadline
 * passes first.
 */
public class CompactedTopicCheck {
  public static void main(String[] args) throws Exception {
    switch (args[0]) {
      case "write": write(args[1], args[2], args[3], Path.of(args[4])); break;
      case "read": for (String isolation : args[3].split(",")) read(args[1], args[2], isolation, Long.parseLong(args[4])); break;
      default: throw new IllegalArgumentException("unknown mode " + args[0]);
    }
  }

  static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static KafkaProducer<String, String> producer(String bootstrap, String transactionalId) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    if (transactionalId != null) props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    KafkaProducer<String, String> producer = new KafkaProducer<>(props);
    if (transactionalId != null) producer.initTransactions();
    return producer;
  }

  static void write(String bootstrap, String topicList, String idPrefix, Path plan) throws Exception {
    String[] topics = topicList.split(",");
    Map<String, KafkaProducer<String, String>> producers = new HashMap<>();
    // The log end each partition must reach: one past the last record or marker written there.
    Map<TopicPartition, Long> ends = new HashMap<>();
    Map<String, Set<TopicPartition>> inTransaction = new HashMap<>();
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (Admin admin = Admin.create(adminProps)) {
      for (String line : Files.readAllLines(plan)) {
        if (line.isBlank()) continue;
        String[] f = line.trim().split(" ");
        String name = f[1];
        KafkaProducer<String, String> producer = producers.get(name);
        if (producer == null) {
          producer = producer(bootstrap, name.equals("P") ? null : idPrefix + "-" + name);
          producers.put(name, producer);
        }
        switch (f[0]) {
          case "send": {
            String value = f[4].equals("-") ? null : f[4];
            for (String topic : topics) {
              RecordMetadata m = producer.send(new ProducerRecord<>(topic, Integer.parseInt(f[2]), f[3], value)).get();
              say("W " + topic + " " + name + " " + m.partition() + " " + m.offset() + " " + f[3]);
              TopicPartition tp = new TopicPartition(topic, m.partition());
              ends.put(tp, m.offset() + 1);
              if (inTransaction.containsKey(name)) inTransaction.get(name).add(tp);
            }
            break;
          }
          case "begin": producer.beginTransaction(); inTransaction.put(name, new HashSet<>()); break;
          case "commit":
          case "abort": {
            if (f[0].equals("commit")) producer.commitTransaction();
            else producer.abortTransaction();
            Set<TopicPartition> touched = inTransaction.remove(name);
            for (TopicPartition tp : touched) ends.put(tp, ends.get(tp) + 1);
            awaitEnds(admin, touched, ends);
            say("E " + name + " " + f[0]);
            break;
          }
          default: throw new IllegalArgumentException("unknown step " + line);
        }
      }
      say("DONE");
    } catch (Exception e) {
      say("FAILED " + e.getClass().getName() + " " + e.getMessage());
      e.printStackTrace();
      System.exit(1);
    } finally {
      for (KafkaProducer<String, String> p : producers.values()) p.close(Duration.ofSeconds(10));
    }
  }

  /** Until the high watermark of every partition in `tps` is the end this program expects there. */
  static void awaitEnds(Admin admin, Set<TopicPartition> tps, Map<TopicPartition, Long> ends) throws Exception {
    long deadline = System.currentTimeMillis() + 30_000;
    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
    for (TopicPartition tp : tps) latest.put(tp, OffsetSpec.latest());
    while (true) {
      boolean reached = true;
      for (var e : admin.listOffsets(latest).all().get().entrySet()) if (e.getValue().offset() < ends.get(e.getKey())) reached = false;
      if (reached) return;
      if (System.currentTimeMillis() > deadline) throw new IllegalStateException("markers not written within 30 s: " + tps);
      Thread.sleep(10);
    }
  }

  static void read(String bootstrap, String topic, String isolation, long timeoutMs) {
    long deadline = System.currentTimeMillis() + timeoutMs;
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    say("ISOLATION " + isolation);
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) tps.add(new TopicPartition(topic, p.partition()));
      tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
      for (TopicPartition tp : tps) say("END " + tp.partition() + " " + ends.get(tp));
      int count = 0;
      while (true) {
        boolean reached = true;
        for (TopicPartition tp : tps) if (consumer.position(tp) < ends.get(tp)) reached = false;
        if (reached) break;
        if (System.currentTimeMillis() > deadline) {
          for (TopicPartition tp : tps) say("POSITION " + tp.partition() + " " + consumer.position(tp));
          say("TIMEOUT " + count);
          System.exit(2);
        }
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          say("R " + r.partition() + " " + r.offset() + " " + r.key() + " " + (r.value() == null ? "-" : "=" + r.value()));
          count++;
        }
      }
      say("DONE " + count);
    }
  }
}
