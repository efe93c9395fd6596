import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;

/** java CreateTopic <bootstrap> <topic>:<partitions> ... — creates the topics (replication factor 1) and prints CREATED. */
public class CreateTopic {
  public static void main(String[] args) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    try (Admin admin = Admin.create(props)) {
      List<NewTopic> topics = new java.util.ArrayList<>();
      for (int i = 1; i < args.length; i++) {
        String[] parts = args[i].split(":");
        topics.add(new NewTopic(parts[0], Integer.parseInt(parts[1]), (short) 1));
      }
      admin.createTopics(topics).all().get();
      System.out.println("CREATED");
    }
  }
}
