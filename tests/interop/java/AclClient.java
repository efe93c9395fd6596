import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java client refused by the broker's ACLs, for tests/interop/acls-clients.test.ts.
 *
 *   java AclClient producer <bootstrap> <topic> <transactionalId>
 *       initTransactions, then one transaction of one record, committed.
 *   java AclClient consumer <bootstrap> <topic> <group>
 *       subscribes with the group and polls for up to 20 s.
 *
 * Prints OK when everything succeeded, else EXCEPTION <class of the first exception> (and CAUSE <class> for
 * each cause), then DONE; exit 0 either way (the test reads the lines).
 */
public class AclClient {
  public static void main(String[] args) {
    String mode = args[0];
    String bootstrap = args[1];
    String topic = args[2];
    String id = args[3];
    try {
      if (mode.equals("producer")) produce(bootstrap, topic, id);
      else consume(bootstrap, topic, id);
      System.out.println("OK");
    } catch (Exception e) {
      System.out.println("EXCEPTION " + e.getClass().getName());
      for (Throwable c = e.getCause(); c != null; c = c.getCause()) System.out.println("CAUSE " + c.getClass().getName());
    }
    System.out.println("DONE");
    System.out.flush();
    System.exit(0);
  }

  static void produce(String bootstrap, String topic, String transactionalId) throws Exception {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
      producer.initTransactions();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(topic, "k", "v")).get();
      producer.commitTransaction();
    }
  }

  static void consume(String bootstrap, String topic, String group) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      long deadline = System.currentTimeMillis() + 20_000;
      while (System.currentTimeMillis() < deadline) {
        if (!consumer.poll(Duration.ofMillis(500)).isEmpty()) return;
      }
      throw new IllegalStateException("no record within 20 s");
    }
  }
}
