import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Compression both ways with the Java client, for tests/interop/compression.test.ts.
 *
 *   java CompressionCheck <bootstrap> <count> <codec>...
 *
 * For each codec: produces <count> records to topic java-<codec> (partition 0) with compression.type=<codec>
 * and batches large enough to span several compression blocks, then prints PRODUCED <codec> <count>. Then,
 * for each codec, reads topic bunka-<codec> (written by the test in that codec) from the beginning until
 * <count> records arrived and prints R <codec> <offset> <key> <value> <header h> per record and
 * CONSUMED <codec> <n>. Record i is key "key-<i>", value "<codec>:<i>:" followed by "exactly once "
 * repeated (i % 7 + 1) times, header h = "<i>", exactly as the test's own records.
 */
public class CompressionCheck {
  static String value(String codec, int i) {
    return codec + ":" + i + ":" + "exactly once ".repeat(i % 7 + 1);
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    int count = Integer.parseInt(args[1]);
    List<String> codecs = new ArrayList<>();
    for (int i = 2; i < args.length; i++) codecs.add(args[i]);

    for (String codec : codecs) {
      Properties props = new Properties();
      props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
      props.put(ProducerConfig.BATCH_SIZE_CONFIG, "262144");
      props.put(ProducerConfig.LINGER_MS_CONFIG, "200");
      props.put(ProducerConfig.ACKS_CONFIG, "all");
      props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
        for (int i = 0; i < count; i++) {
          ProducerRecord<String, String> record = new ProducerRecord<>("java-" + codec, 0, "key-" + i, value(codec, i));
          record.headers().add("h", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
          producer.send(record);
        }
        producer.flush();
      }
      System.out.println("PRODUCED " + codec + " " + count);
    }

    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      for (String codec : codecs) {
        TopicPartition tp = new TopicPartition("bunka-" + codec, 0);
        consumer.assign(List.of(tp));
        consumer.seekToBeginning(List.of(tp));
        long deadline = System.currentTimeMillis() + 30_000;
        int consumed = 0;
        while (consumed < count && System.currentTimeMillis() < deadline) {
          for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
            Header h = r.headers().lastHeader("h");
            String header = h == null ? "-" : new String(h.value(), StandardCharsets.UTF_8);
            System.out.println("R " + codec + " " + r.offset() + " " + r.key() + " " + r.value().replace(' ', '_') + " " + header);
            consumed++;
          }
        }
        System.out.println("CONSUMED " + codec + " " + consumed);
      }
    }
  }
}
