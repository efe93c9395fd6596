import java.util.Map;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;

/**
 * A Kafka Connect worker in distributed mode, for tests/interop/kafka-connect-eos.test.ts.
 *
 *   java ConnectWorker <worker.properties>
 *
 * The worker is Connect's own (ConnectDistributed); this launcher only prints REST <url> once the REST server
 * listens, because the test lets it pick a free port (listeners=http://127.0.0.1:0) and needs to know which.
 * A SIGTERM stops the worker through Connect's shutdown hook.
 */
public class ConnectWorker {
  public static void main(String[] args) throws Exception {
    Map<String, String> workerProps = Utils.propsToStringMap(Utils.loadProps(args[0]));
    Connect<DistributedHerder> connect = new ConnectDistributed().startConnect(workerProps);
    System.out.println("REST " + connect.rest().advertisedUrl());
    connect.awaitStop();
  }
}
