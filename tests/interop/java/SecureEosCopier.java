/*
 * An exactly-once copier with Apache's Java clients, as EosCopier.java copies, for a secured listener: the
 * consumer and the producer both take the client properties of CLIENT_CONFIG (security.protocol,
 * sasl.mechanism, sasl.jaas.config, the truststore), so that the copier runs as that file's principal. A
 * read_committed consumer in a group (auto-commit off) and a transactional producer committing the consumed
 * offsets with sendOffsetsToTransaction(offsets, consumer.groupMetadata()); input partition p goes to
 * output partition p with the same key and the value upper-cased. It stops once TOTAL records are copied.
 *
 *   java -cp '<kafka libs>/*:<classes>' SecureEosCopier CLIENT_CONFIG BOOTSTRAP INPUT OUTPUT GROUP TXN_ID TXN_SIZE TOTAL
 *
 * stdout: READY, COMMIT <n> <records so far>, DONE <records> (exit 0); any error prints
 * FATAL <exception> [caused by <exception>]... and exits 2, so that a refusal names its authorization error.
 */
import java.io.FileInputStream;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecureEosCopier {
  static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  static String chain(Throwable e) {
    StringBuilder out = new StringBuilder(e.toString());
    for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) out.append(" caused by ").append(c);
    return out.toString().replace('\n', ' ');
  }

  public static void main(String[] args) throws Exception {
    String clientConfig = args[0], bootstrap = args[1], input = args[2], output = args[3], group = args[4], txnId = args[5];
    int txnSize = Integer.parseInt(args[6]);
    long total = Long.parseLong(args[7]);
    Properties security = new Properties();
    try (FileInputStream in = new FileInputStream(clientConfig)) {
      security.load(in);
    }

    Properties cp = new Properties();
    cp.putAll(security);
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    cp.put(ConsumerConfig.CLIENT_ID_CONFIG, txnId + "-consumer");
    cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(txnSize));
    cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

    Properties pp = new Properties();
    pp.putAll(security);
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    pp.put(ProducerConfig.CLIENT_ID_CONFIG, txnId + "-producer");
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    // A refusal the client would otherwise wait on (metadata of a topic it may not see) ends within this.
    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

    KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
    KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
    // Not try-with-resources: after a refusal, closing would wait on the broken transaction; the error is the result.
    try {
      producer.initTransactions();
      consumer.subscribe(List.of(input));
      say("READY");
      int txns = 0;
      long copied = 0;
      while (copied < total) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        if (records.isEmpty()) continue;
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
          Future<RecordMetadata> sent = producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value().toUpperCase()));
          // A send refused at once (no metadata for a topic it may not write) dooms the transaction: stop here
          // rather than wait on the metadata of every further record.
          if (sent.isDone()) sent.get();
          offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        producer.commitTransaction();
        txns++;
        copied += records.count();
        say("COMMIT " + txns + " " + copied);
      }
      producer.close();
      consumer.close();
      say("DONE " + copied);
    } catch (Exception e) {
      say("FATAL " + chain(e));
      System.exit(2);
    }
  }
}
