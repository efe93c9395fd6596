import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Position validation with leader epochs (KIP-320) by the Java consumer, for
 * tests/interop/leader-epochs-java.test.ts.
 *
 *   java EpochValidation <bootstrap> <topic> <group> <from offset> <count>
 *
 * Partition 0 of <topic> holds at least <from offset> + <count> records. Three consumers, each with
 * auto.offset.reset=none, so that a position that fails validation is an exception, never a silent reset:
 *   1. commits <from offset> with leader epoch 0 (OffsetAndMetadata with a leader epoch) for <group>;
 *   2. a consumer of <group> starts at that committed offset (fetched with its epoch) and reads <count>
 *      records: prints COMMITTED <offset> <epoch> for what the group holds, then R committed <offset>
 *      <value> <record leader epoch> per record;
 *   3. a consumer without a group seeks to <from offset> with leader epoch 0 (seek(tp, OffsetAndMetadata))
 *      and reads <count> records: R seek ... per record.
 * Each consumer's position carries an epoch, so the client validates it with OffsetForLeaderEpoch before
 * it fetches. Prints DONE at the end.
 */
public class EpochValidation {
  static Properties props(String bootstrap, String group) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    if (group != null) props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    return props;
  }

  static void readCount(KafkaConsumer<String, String> consumer, String label, int count) {
    int seen = 0;
    long deadline = System.currentTimeMillis() + 60_000;
    while (seen < count) {
      if (System.currentTimeMillis() > deadline) throw new RuntimeException(label + ": only " + seen + " records within 60 s");
      for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(200))) {
        if (seen >= count) break;
        System.out.println("R " + label + " " + record.offset() + " " + record.value() + " " + record.leaderEpoch().orElse(-1));
        seen++;
      }
    }
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    long from = Long.parseLong(args[3]);
    int count = Integer.parseInt(args[4]);
    TopicPartition tp = new TopicPartition(topic, 0);
    OffsetAndMetadata withEpoch = new OffsetAndMetadata(from, Optional.of(0), "");

    try (KafkaConsumer<String, String> committer = new KafkaConsumer<>(props(bootstrap, group))) {
      committer.assign(List.of(tp));
      committer.commitSync(Map.of(tp, withEpoch));
    }

    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props(bootstrap, group))) {
      consumer.assign(List.of(tp));
      OffsetAndMetadata committed = consumer.committed(java.util.Set.of(tp)).get(tp);
      System.out.println("COMMITTED " + committed.offset() + " " + committed.leaderEpoch().orElse(-1));
      readCount(consumer, "committed", count);
    }

    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props(bootstrap, null))) {
      consumer.assign(List.of(tp));
      consumer.seek(tp, withEpoch);
      readCount(consumer, "seek", count);
    }
    System.out.println("DONE");
  }
}
