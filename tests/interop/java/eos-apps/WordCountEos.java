import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * A Kafka Streams word count under exactly_once_v2, for tests/interop/kafka-streams-eos.test.ts.
 *
 *   java WordCountEos <bootstrap> <application.id> <input> <output> <state.dir> <group.instance.id> <transaction.timeout.ms> \
 *        <changelog topic configs: name=value,...>
 *
 * Input values are lines of words separated by single spaces. Each word is re-keyed by itself (groupBy: the
 * repartition topic <application.id>-words-repartition), counted in a persistent RocksDB store "counts"
 * (changelog <application.id>-counts-changelog, cleanup.policy=compact, with the topic configs given, e.g. short
 * segments so that the broker's cleaner compacts it while the test runs) and every new count is written to the
 * output topic as word -> count (a big-endian long). The record cache is off, so each input word yields
 * exactly one output record: under exactly-once the committed counts of a word are 1, 2, 3, ... with no gap
 * and no repeat, whatever crashes happened.
 *
 * The main consumer is a static member (group.instance.id), so a restart takes the killed instance's tasks
 * back at once instead of waiting for its session to expire. The transactional id is derived from the
 * process id that Streams keeps in the state directory: a restart on the same directory fences the killed
 * instance's producer, one on a wiped directory waits for the broker to abort the killed instance's
 * transaction (transaction.timeout.ms) before the committed offsets are stable again.
 *
 * Prints, one line each, for the test to follow: AT <partition> <offset> for every input line processed
 * (uncommitted progress: the kill moments are chosen by it), STATE <state> on every state change,
 * RESTORE <topic> <partition> <start> <end> and RESTORED <topic> <partition> <records> around the restoration
 * of a store from its changelog, FATAL <exception> when a stream thread dies, CLOSED after a SIGTERM's
 * orderly close. Exits 1 when Streams ended in ERROR (after a SIGTERM the JVM exits 143 as usual).
 */
public class WordCountEos {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String applicationId = args[1];
    String input = args[2];
    String output = args[3];
    String stateDir = args[4];
    String instanceId = args[5];
    int transactionTimeoutMs = Integer.parseInt(args[6]);
    Map<String, String> changelogConfigs = new HashMap<>();
    for (String entry : args[7].split(",")) {
      if (entry.isEmpty()) continue;
      String[] nameValue = entry.split("=", 2);
      changelogConfigs.put(nameValue[0], nameValue[1]);
    }

    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    // One output record per input word (no cache folding updates together): the test checks every count.
    props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    // Short transactions: a kill then usually lands in an open one, which must be aborted.
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    // Consumed repartition records are deleted (DeleteRecords up to the committed offsets) every second rather
    // than every 30 s, so that a run of the test does it.
    props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
    props.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), instanceId);
    props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), transactionTimeoutMs);

    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .processValues(PositionReporter::new)
        .flatMapValues(line -> Arrays.asList(line.split(" ")))
        .groupBy((lineKey, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
        .count(
            Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String())
                .withValueSerde(Serdes.Long())
                .withLoggingEnabled(changelogConfigs))
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    AtomicBoolean failed = new AtomicBoolean(false);
    streams.setStateListener((now, before) -> {
      System.out.println("STATE " + now);
      if (now == KafkaStreams.State.ERROR) failed.set(true);
      if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) stopped.countDown();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.out.println("FATAL " + e);
      e.printStackTrace();
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.setGlobalStateRestoreListener(new StateRestoreListener() {
      @Override
      public void onRestoreStart(TopicPartition tp, String store, long startingOffset, long endingOffset) {
        System.out.println("RESTORE " + tp.topic() + " " + tp.partition() + " " + startingOffset + " " + endingOffset);
      }

      @Override
      public void onBatchRestored(TopicPartition tp, String store, long batchEndOffset, long numRestored) {}

      @Override
      public void onRestoreEnd(TopicPartition tp, String store, long totalRestored) {
        System.out.println("RESTORED " + tp.topic() + " " + tp.partition() + " " + totalRestored);
      }
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(Duration.ofSeconds(30));
      System.out.println("CLOSED");
    }));
    streams.start();
    stopped.await();
    // ERROR: the client shut itself down after a fatal error (printed above); an orderly close exits 0.
    if (failed.get()) {
      System.out.flush();
      Runtime.getRuntime().halt(1);
    }
  }

  /** Passes every line on unchanged, printing the input position it was read at. */
  static final class PositionReporter implements FixedKeyProcessor<String, String, String> {
    private FixedKeyProcessorContext<String, String> context;

    @Override
    public void init(FixedKeyProcessorContext<String, String> context) {
      this.context = context;
    }

    @Override
    public void process(FixedKeyRecord<String, String> record) {
      context.recordMetadata().ifPresent(m -> System.out.println("AT " + m.partition() + " " + m.offset()));
      context.forward(record);
    }
  }
}
