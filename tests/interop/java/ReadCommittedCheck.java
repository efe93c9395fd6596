import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * Reads a whole topic from the beginning with the Java consumer (no group: assign + seekToBeginning) and prints
 * what it saw, for tests/interop/transactions-java.test.ts.
 *
 *   java ReadCommittedCheck <bootstrap> <topic> <read_committed|read_uncommitted> <timeoutMs> [minRecords]
 *
 * Reads until every partition's position reached its end offset (endOffsets: the last stable offset under
 * read_committed, the high watermark under read_uncommitted) and at least minRecords records arrived (the
 * end offsets are asked again while fewer did). Prints END <partition> <endOffset> per partition, then
 * R <partition> <offset> <key> <value> per record in the order received, then DONE <count>; TIMEOUT <count>
 * and exit 2 when the deadline passes first.
 */
public class ReadCommittedCheck {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String isolation = args[2];
    long deadline = System.currentTimeMillis() + Long.parseLong(args[3]);
    int minRecords = args.length > 4 ? Integer.parseInt(args[4]) : 0;
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> tps = new ArrayList<>();
      for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) tps.add(new TopicPartition(topic, p.partition()));
      tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      List<String> lines = new ArrayList<>();
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
      while (true) {
        boolean reached = true;
        for (TopicPartition tp : tps) if (consumer.position(tp) < ends.get(tp)) reached = false;
        if (reached && lines.size() >= minRecords) break;
        if (System.currentTimeMillis() > deadline) {
          for (TopicPartition tp : tps) System.out.println("END " + tp.partition() + " " + ends.get(tp) + " position " + consumer.position(tp));
          for (String l : lines) System.out.println(l);
          System.out.println("TIMEOUT " + lines.size());
          System.exit(2);
        }
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          lines.add("R " + r.partition() + " " + r.offset() + " " + r.key() + " " + r.value());
        }
        if (reached && lines.size() < minRecords) ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
      }
      for (TopicPartition tp : tps) System.out.println("END " + tp.partition() + " " + ends.get(tp));
      for (String l : lines) System.out.println(l);
      System.out.println("DONE " + lines.size());
    }
  }
}
