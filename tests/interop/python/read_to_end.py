"""Reading whole partitions with librdkafka's Consumer, for the interop helpers (eos_copier.py, txn_zombie.py)."""
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition


def read_to_end(bootstrap, topic, partitions, isolation, entry):
    """Partitions 0..partitions-1 of topic from the beginning to their end, through assign() (no group), with
    isolation.level `isolation`: {"<partition>": [entry(msg), ...]}. Exits the process with the reason when a
    partition does not reach its end within 60 s or the consumer reports an error."""
    errors = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        # librdkafka wants a group id for a consumer; with assign() and no commits it never joins the group.
        "group.id": f"unused-{topic}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "error_cb": lambda err: errors.append(str(err)),
    })
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = {str(p): [] for p in range(partitions)}
    at_end = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions:
        if time.monotonic() > deadline:
            raise SystemExit(f"read {topic}: partitions {sorted(set(range(partitions)) - at_end)} never reached their end; errors {errors[:5]}")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            raise SystemExit(f"read {topic}: {msg.error()}")
        at_end.discard(msg.partition())
        out[str(msg.partition())].append(entry(msg))
    consumer.close()
    return out
