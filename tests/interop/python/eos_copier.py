"""A consume-transform-produce copier with librdkafka (confluent-kafka), exactly once (EOS v2, KIP-447).

    eos_copier.py copy BOOTSTRAP INPUT OUTPUT GROUP TXN_ID INSTANCE_ID TXN_SIZE PAUSE_AT PAUSE_STAGE
    eos_copier.py read BOOTSTRAP TOPIC PARTITIONS

copy: a Consumer in GROUP with isolation.level=read_committed and enable.auto.commit=false, and a Producer
with transactional.id TXN_ID that commits the consumed offsets with send_offsets_to_transaction(offsets,
consumer.consumer_group_metadata()). Each consume() of at most TXN_SIZE messages becomes one transaction:
every message of input partition p goes to output partition p with the same key and the value upper-cased.
INSTANCE_ID is group.instance.id (static membership), "-" for none. PAUSE_AT > 0 stops transaction number
PAUSE_AT of this run for good in the middle (PAUSE_STAGE "sent": its messages are flushed to the broker;
"offsets": its offsets are sent to the transaction too), after printing PAUSED, so that the test can SIGKILL
it with a transaction open. It never exits by itself. stdout, one line per event: READY, COMMIT <n>
<messages in this run>, PAUSED <n>, ABORT <n> <error>, RETRY abort <error> (abort_transaction timed out and
is called again); a fatal error prints FATAL and exits 2.

read: reads partitions 0..PARTITIONS-1 of TOPIC from the beginning with isolation.level=read_committed
through assign() (no group), up to the end of each partition, and prints {"<partition>": [[key, value],
...]} as one JSON line: librdkafka's own filtering of aborted transactions, as a second opinion.
"""
import json
import sys
import time

from read_to_end import read_to_end
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition


def say(line):
    print(line, flush=True)


def copy(bootstrap, input_topic, output_topic, group, txn_id, instance_id, txn_size, pause_at, pause_stage):
    consumer_config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"{txn_id}-consumer",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    }
    if instance_id != "-":
        consumer_config["group.instance.id"] = instance_id
    consumer = Consumer(consumer_config)
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "client.id": f"{txn_id}-producer",
        "linger.ms": 5,
    })
    # Fences the previous run (same transactional.id) and aborts its open transaction before anything is read.
    producer.init_transactions(60)
    consumer.subscribe([input_topic])
    say("READY")

    txns = 0
    copied = 0
    while True:
        messages = [m for m in consumer.consume(num_messages=txn_size, timeout=0.2) if m.error() is None]
        if not messages:
            continue
        n = txns + 1
        try:
            producer.begin_transaction()
            offsets = {}
            for m in messages:
                producer.produce(output_topic, key=m.key(), value=m.value().upper(), partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            if n == pause_at and pause_stage == "sent":
                pause(producer, n)
            producer.send_offsets_to_transaction(
                [TopicPartition(input_topic, p, o) for p, o in sorted(offsets.items())],
                consumer.consumer_group_metadata(),
                30,
            )
            if n == pause_at and pause_stage == "offsets":
                pause(producer, n)
            producer.commit_transaction(30)
            txns = n
            copied += len(messages)
            say(f"COMMIT {txns} {copied}")
        except KafkaException as e:
            error = e.args[0]
            if error.fatal() or not error.txn_requires_abort():
                say(f"FATAL {error}")
                sys.exit(2)
            say(f"ABORT {n} {error}")
            abort(producer)
            rewind(consumer)


def abort(producer):
    """abort_transaction, called again while it fails retriably (librdkafka's contract: a timeout while the
    transaction's messages still wait for a leader is retriable)."""
    while True:
        try:
            producer.abort_transaction(30)
            return
        except KafkaException as e:
            if not e.args[0].retriable():
                raise
            say(f"RETRY abort {e.args[0]}")


def pause(producer, n):
    producer.flush(30)
    say(f"PAUSED {n}")
    while True:
        time.sleep(3600)


def rewind(consumer):
    """Back to the committed offsets: the aborted transaction's messages are read again."""
    assignment = consumer.assignment()
    for tp in consumer.committed(assignment, timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


def read(bootstrap, topic, partitions):
    say(json.dumps(read_to_end(bootstrap, topic, partitions, "read_committed", lambda msg: [msg.key().decode(), msg.value().decode()])))


def main():
    mode = sys.argv[1]
    if mode == "copy":
        a = sys.argv[2:]
        copy(a[0], a[1], a[2], a[3], a[4], a[5], int(a[6]), int(a[7]), a[8])
    elif mode == "read":
        read(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)


if __name__ == "__main__":
    main()
