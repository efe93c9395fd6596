"""librdkafka (through confluent-kafka) as a consumer group member against a broker.

    consumer_group.py BOOTSTRAP TOPIC GROUP COUNT

TOPIC must hold COUNT messages with distinct keys. Consumer 1 joins GROUP and consumes a third of them;
consumer 2 then joins (the group rebalances) and both consume until every message has been committed.
Offsets are committed synchronously per message, with auto-commit off, and a message counts as consumed
only once its commit succeeded: a commit refused by a rebalance leaves the message to whoever owns the
partition next, which starts from the committed offset. Then the AdminClient lists and describes the
group and reads its committed offsets.

Prints one JSON object on stdout and exits 0 when the script ran (the caller judges the results).
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, libversion
from confluent_kafka.admin import AdminClient
from confluent_kafka import ConsumerGroupTopicPartitions


def log(message):
    print(message, file=sys.stderr, flush=True)


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    committed_by_key = {}
    deliveries = 0
    refused_commits = []
    errors = []
    assignments = {"c1": [], "c2": []}

    def make(name):
        def on_assign(consumer, partitions):
            assignments[name].append(sorted(p.partition for p in partitions))

        def on_error(err):
            errors.append(f"{name}: {err}")
            log(f"{name}: {err}")

        consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": f"rdk-{name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "error_cb": on_error,
        })
        consumer.subscribe([topic], on_assign=on_assign)
        return consumer

    def poll_once(name, consumer):
        # A short wait: the two consumers are polled in turn, and one may have nothing left to read.
        nonlocal deliveries
        for msg in consumer.consume(num_messages=50, timeout=0.02):
            if msg.error():
                errors.append(f"{name}: {msg.error()}")
                continue
            deliveries += 1
            try:
                consumer.commit(message=msg, asynchronous=False)
            except KafkaException as e:
                # The generation is over: the rebalance resets every position to the committed offset, so
                # the rest of this batch comes again; committing it now could skip this message.
                refused_commits.append(f"{name}: {e}")
                return
            key = msg.key().decode()
            committed_by_key[key] = committed_by_key.get(key, 0) + 1

    started = time.time()
    deadline = started + 90
    c1 = make("c1")
    while len(committed_by_key) < count // 3 and time.time() < deadline:
        poll_once("c1", c1)
    c2 = make("c2")
    # Until every message is committed and the rebalance c2's arrival started is done (c1 assigned again,
    # c2 assigned): on a fast machine c1 can read the rest before c2's JoinGroup completes.
    rebalanced = lambda: len(assignments["c1"]) >= 2 and len(assignments["c2"]) >= 1
    while (sum(committed_by_key.values()) < count or not rebalanced()) and time.time() < deadline:
        poll_once("c1", c1)
        poll_once("c2", c2)
    c1.close()
    c2.close()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(timeout=30)
    listed_ids = sorted(g.group_id for g in listed.valid)
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed_offsets = {str(tp.partition): tp.offset for tp in offsets.topic_partitions if tp.topic == topic}

    print(json.dumps({
        "librdkafka": libversion()[0],
        "keys_committed": len(committed_by_key),
        "duplicates": sorted(k for k, n in committed_by_key.items() if n > 1),
        "deliveries": deliveries,
        "refused_commits": len(refused_commits),
        "errors": errors,
        "assignments": assignments,
        "listed": listed_ids,
        "group_state": str(described.state),
        "group_members": len(described.members),
        "protocol_type": described.is_simple_consumer_group,
        "committed_offsets": committed_offsets,
        "seconds": round(time.time() - started, 2),
    }))


if __name__ == "__main__":
    main()
