"""Compression both ways with librdkafka (through confluent-kafka), for tests/interop/compression.test.ts.

    compression_check.py BOOTSTRAP COUNT CODEC [CODEC ...]

For each codec: produces COUNT records to topic "rdk-<codec>" (partition 0) with compression.type=<codec>,
waiting for every delivery report, then reads topic "bunka-<codec>" (written by the test in that codec)
from the beginning until COUNT records arrived. Record i is key "key-<i>", value "<codec>:<i>:" followed
by "exactly once " repeated (i % 7 + 1) times, header h = "<i>", as the test's own records. Prints one
JSON object: {"librdkafka": "2.x", "results": {"<codec>": {"delivered", "delivery_errors", "records":
[[offset, key, value, h], ...], "consumer_errors"}}}.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition, OFFSET_BEGINNING, libversion


def value(codec, i):
    return f"{codec}:{i}:" + "exactly once " * (i % 7 + 1)


def produce(bootstrap, codec, count):
    delivered = []
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.offset())

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "acks": "all",
        # Batches large enough to span several compression blocks.
        "linger.ms": 200,
        "batch.size": 1000000,
        "message.timeout.ms": 30000,
    })
    for i in range(count):
        while True:
            try:
                producer.produce(f"rdk-{codec}", key=f"key-{i}", value=value(codec, i), partition=0,
                                 headers=[("h", str(i).encode())], on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    return {"delivered": len(delivered), "delivery_errors": errors[:10]}


def consume(bootstrap, codec, count):
    errors = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        # librdkafka wants a group id for a consumer; with assign() and no commits it never joins the group.
        "group.id": f"unused-{codec}",
        "enable.auto.commit": False,
        "error_cb": lambda err: errors.append(str(err)),
    })
    consumer.assign([TopicPartition(f"bunka-{codec}", 0, OFFSET_BEGINNING)])
    records = []
    deadline = time.monotonic() + 30
    while len(records) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append(str(msg.error()))
            continue
        headers = dict(msg.headers() or [])
        h = headers.get("h")
        records.append([msg.offset(), msg.key().decode(), msg.value().decode(), None if h is None else h.decode()])
    consumer.close()
    return {"records": records, "consumer_errors": errors[:10]}


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    bootstrap, count = sys.argv[1], int(sys.argv[2])
    results = {}
    for codec in sys.argv[3:]:
        results[codec] = produce(bootstrap, codec, count)
    for codec in sys.argv[3:]:
        results[codec].update(consume(bootstrap, codec, count))
    print(json.dumps({"librdkafka": libversion()[0], "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
