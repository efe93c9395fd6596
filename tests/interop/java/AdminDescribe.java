import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeReplicaLogDirsResult.ReplicaLogDirInfo;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;

/**
 * The Java admin client's describe calls against a broker, printed one fact a line so that the test can
 * compare bunka's answers with Apache Kafka's: describeFeatures, describeLogDirs, describeReplicaLogDirs
 * (DescribeLogDirs with a topic list) and describeTopics (DescribeTopicPartitions).
 *
 *   AdminDescribe <bootstrap> <topic,...> <missing-topic>
 */
public class AdminDescribe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        List<String> topics = Arrays.asList(args[1].split(","));
        String missing = args[2];
        try (Admin admin = Admin.create(props)) {
            FeatureMetadata features = admin.describeFeatures().featureMetadata().get();
            new TreeMap<>(features.supportedFeatures()).forEach((name, range) ->
                System.out.println("FEATURE " + name + " " + range.minVersion() + " " + range.maxVersion()));
            new TreeMap<>(features.finalizedFeatures()).forEach((name, range) ->
                System.out.println("FINALIZED " + name + " " + range.maxVersionLevel()));
            System.out.println("EPOCH " + features.finalizedFeaturesEpoch().map(String::valueOf).orElse("-"));

            List<Integer> brokers = admin.describeCluster().nodes().get().stream().map(Node::id).sorted().collect(Collectors.toList());
            Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(brokers).allDescriptions().get();
            for (int broker : brokers) {
                for (Map.Entry<String, LogDirDescription> dir : dirs.get(broker).entrySet()) {
                    LogDirDescription d = dir.getValue();
                    System.out.println("LOGDIR " + broker + " " + dir.getKey() + " error=" + (d.error() == null ? "none" : d.error().getClass().getSimpleName())
                        + " total=" + (d.totalBytes().isPresent() ? "yes" : "no") + " usable=" + (d.usableBytes().isPresent() ? "yes" : "no"));
                    TreeMap<String, ReplicaInfo> replicas = new TreeMap<>();
                    d.replicaInfos().forEach((tp, info) -> replicas.put(tp.toString(), info));
                    replicas.forEach((tp, info) -> {
                        if (topics.contains(tp.substring(0, tp.lastIndexOf('-'))))
                            System.out.println("REPLICA " + tp + " size=" + info.size() + " lag=" + info.offsetLag() + " future=" + info.isFuture());
                    });
                }
            }

            List<TopicPartitionReplica> asked = new ArrayList<>();
            for (String topic : topics) asked.add(new TopicPartitionReplica(topic, 0, brokers.get(0)));
            asked.add(new TopicPartitionReplica(missing, 0, brokers.get(0)));
            Map<TopicPartitionReplica, ReplicaLogDirInfo> replicaDirs = admin.describeReplicaLogDirs(asked).all().get();
            for (TopicPartitionReplica r : asked) {
                ReplicaLogDirInfo info = replicaDirs.get(r);
                System.out.println("REPLICADIR " + r.topic() + "-" + r.partition() + " dir=" + (info.getCurrentReplicaLogDir() == null ? "none" : "set")
                    + " lag=" + info.getCurrentReplicaOffsetLag() + " future=" + (info.getFutureReplicaLogDir() == null ? "none" : "set"));
            }

            Map<String, TopicDescription> described = admin.describeTopics(topics).allTopicNames().get();
            for (String topic : topics) {
                TopicDescription t = described.get(topic);
                System.out.println("TOPIC " + t.name() + " internal=" + t.isInternal() + " partitions=" + t.partitions().size());
                for (TopicPartitionInfo p : t.partitions()) {
                    System.out.println("PARTITION " + t.name() + " " + p.partition() + " leader=" + (p.leader() == null ? "none" : String.valueOf(p.leader().id()))
                        + " replicas=" + ids(p.replicas()) + " isr=" + ids(p.isr()) + " elr=" + ids(p.elr()) + " lastKnownElr=" + ids(p.lastKnownElr()));
                }
            }
            try {
                admin.describeTopics(List.of(missing)).allTopicNames().get();
                System.out.println("MISSING " + missing + " found");
            } catch (ExecutionException e) {
                System.out.println("MISSING " + missing + " " + e.getCause().getClass().getSimpleName());
            }
        }
    }

    private static String ids(List<Node> nodes) {
        if (nodes == null) return "null";
        return nodes.stream().map(n -> String.valueOf(n.id())).collect(Collectors.joining(",", "[", "]"));
    }
}
