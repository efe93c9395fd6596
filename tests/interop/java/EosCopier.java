/*
 * A consume-transform-produce copier with Apache's Java clients, exactly once (EOS v2, KIP-447):
 * a read_committed KafkaConsumer in a group (auto-commit off) and a transactional KafkaProducer that commits
 * the consumed offsets with sendOffsetsToTransaction(offsets, consumer.groupMetadata()). Each poll (at most
 * TXN_SIZE records) becomes one transaction: every record of input partition p goes to output partition p
 * with the same key and the value upper-cased.
 *
 *   java -cp '<kafka libs>/*:<classes>' EosCopier BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE
 *
 * INSTANCE_ID is the consumer's group.instance.id (static membership), "-" for none. PAUSE_AT > 0 makes
 * transaction number PAUSE_AT of this run stop for good in the middle (PAUSE_STAGE "sent": its records are
 * flushed to the broker; "offsets": also its offsets are sent to the transaction), after printing PAUSED, so
 * that the test can SIGKILL it with a transaction open. The copier never exits by itself.
 *
 * stdout, one line per event: READY, COMMIT <n> <records in this run>, PAUSED <n>, ABORT <n> <error>.
 * A fatal error (fenced, ...) prints FATAL and exits 2.
 */
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class EosCopier {
  static void say(String line) {
    System.out.println(line);
    System.out.flush();
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], input = args[1], output = args[2], group = args[3], txnId = args[4], instanceId = args[5];
    int txnSize = Integer.parseInt(args[6]);
    int pauseAt = Integer.parseInt(args[7]);
    String pauseStage = args[8];

    Properties cp = new Properties();
    cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    if (!instanceId.equals("-")) cp.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
    cp.put(ConsumerConfig.CLIENT_ID_CONFIG, txnId + "-consumer");
    cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(txnSize));
    cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
    cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

    Properties pp = new Properties();
    pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    pp.put(ProducerConfig.CLIENT_ID_CONFIG, txnId + "-producer");
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());

    KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
    KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
    // Fences the previous run (same transactional.id) and aborts its open transaction before anything is read.
    producer.initTransactions();
    consumer.subscribe(List.of(input));
    say("READY");

    int txns = 0;
    long copied = 0;
    for (;;) {
      ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
      if (records.isEmpty()) continue;
      int n = txns + 1;
      try {
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<String, String> r : records) {
          producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value().toUpperCase()));
          offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        if (n == pauseAt && pauseStage.equals("sent")) pause(producer, n);
        producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
        if (n == pauseAt && pauseStage.equals("offsets")) pause(producer, n);
        producer.commitTransaction();
        txns = n;
        copied += records.count();
        say("COMMIT " + txns + " " + copied);
      } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException | UnsupportedVersionException e) {
        say("FATAL " + e);
        System.exit(2);
      } catch (KafkaException e) {
        say("ABORT " + n + " " + e.toString().replace('\n', ' '));
        producer.abortTransaction();
        rewind(consumer);
      }
    }
  }

  static void pause(KafkaProducer<String, String> producer, int n) throws InterruptedException {
    producer.flush();
    say("PAUSED " + n);
    Thread.sleep(Long.MAX_VALUE);
  }

  /** Back to the committed offsets: the aborted transaction's records are read again. */
  static void rewind(KafkaConsumer<String, String> consumer) {
    Set<TopicPartition> assignment = consumer.assignment();
    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assignment);
    for (TopicPartition tp : assignment) {
      OffsetAndMetadata c = committed.get(tp);
      if (c == null) consumer.seekToBeginning(List.of(tp));
      else consumer.seek(tp, c.offset());
    }
  }
}
