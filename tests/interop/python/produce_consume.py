"""librdkafka (through confluent-kafka) against a broker: for each compression codec, produce N keyed
messages with the idempotent producer, wait for every delivery report, then read the partition back with
a consumer that uses assign() (no group membership, no commits) and compare content and order.

    produce_consume.py BOOTSTRAP TOPIC_PREFIX COUNT CODEC [CODEC ...]

Topic "<TOPIC_PREFIX><codec>" (partition 0) must exist. Prints one JSON object on stdout:
    {"librdkafka": "2.x", "results": {"<codec>": {...}}}
and exits 0 when the script ran (the caller judges the results), non-zero when it could not run.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition, OFFSET_BEGINNING, libversion


def log(message):
    print(message, file=sys.stderr, flush=True)


def produce(bootstrap, topic, count, codec):
    reports = []
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            reports.append((msg.key().decode(), msg.offset()))

    fatal = []

    def on_error(err):
        # Transport errors are retried by librdkafka; a fatal one (idempotence broken) ends the producer.
        if err.fatal():
            fatal.append(str(err))
        log(f"producer {codec}: {err}")

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": codec,
        "linger.ms": 5,
        "batch.num.messages": 100,
        "message.timeout.ms": 60000,
        "error_cb": on_error,
    })
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=f"key-{i}", value=f"{codec}-value-{i}", partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(60)
    return {
        "delivered": len(reports),
        "delivery_errors": errors[:10],
        "fatal_errors": fatal,
        "undelivered": remaining,
        # Offsets in delivery order: the idempotent producer keeps the order, so they must ascend by one.
        "offsets_in_order": all(reports[k][1] == reports[0][1] + k for k in range(len(reports))) if reports else False,
        "keys_in_order": [key for key, _ in reports] == [f"key-{i}" for i in range(len(reports))],
        "first_offset": reports[0][1] if reports else None,
        "last_offset": reports[-1][1] if reports else None,
    }


def consume(bootstrap, topic, count, codec, start_offset):
    errors = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        # librdkafka wants a group id for a consumer; with assign() and no commits it never joins the group.
        "group.id": f"unused-{topic}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "error_cb": lambda err: errors.append(str(err)),
    })
    consumer.assign([TopicPartition(topic, 0, start_offset if start_offset is not None else OFFSET_BEGINNING)])
    messages = []
    deadline = time.monotonic() + 60
    while len(messages) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append(str(msg.error()))
            continue
        messages.append((msg.offset(), msg.key().decode(), msg.value().decode()))
    consumer.close()
    expected = [(f"key-{i}", f"{codec}-value-{i}") for i in range(count)]
    got = [(k, v) for _, k, v in messages]
    mismatch = next((i for i in range(min(len(got), len(expected))) if got[i] != expected[i]), None)
    return {
        "consumed": len(messages),
        "content_matches": got == expected,
        "first_mismatch": None if mismatch is None else {"index": mismatch, "got": got[mismatch], "expected": expected[mismatch]},
        "consumed_offsets_contiguous": all(messages[k][0] == messages[0][0] + k for k in range(len(messages))),
        "first_consumed_offset": messages[0][0] if messages else None,
        "consumer_errors": errors[:10],
    }


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    bootstrap, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    results = {}
    for codec in sys.argv[4:]:
        topic = f"{prefix}{codec}"
        started = time.monotonic()
        produced = produce(bootstrap, topic, count, codec)
        consumed = consume(bootstrap, topic, count, codec, produced["first_offset"])
        results[codec] = {**produced, **consumed, "seconds": round(time.monotonic() - started, 2)}
        log(f"{codec}: {json.dumps(results[codec])}")
    print(json.dumps({"librdkafka": libversion()[0], "results": results}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KafkaException as error:
        log(f"KafkaException: {error}")
        sys.exit(3)
