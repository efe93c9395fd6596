"""Zombie fencing with librdkafka (confluent-kafka), for tests/interop/transactions-clients.test.ts, and one
transaction decided across a broker crash, for tests/fault/endtxn-answered-crash.test.ts (decide).

    txn_zombie.py zombie BOOTSTRAP TOPIC TXN_ID PREFIX N LATE_PARTITION
    txn_zombie.py batches BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS TXNS PER_TXN
    txn_zombie.py decide BOOTSTRAP TOPIC TXN_ID PREFIX PARTITIONS N commit|abort [GROUP OFFSET]
    txn_zombie.py read BOOTSTRAP TOPIC PARTITIONS ISOLATION

Every record has key "<prefix>-<txn>-<i>" and the same value.

zombie: init_transactions, begin_transaction, N records to partition 0, flush (all delivered), prints OPEN
and waits for a line on stdin (EOF: exits 3, the test is gone). Then, as the zombie it has become meanwhile,
produces "<prefix>-0-late" to LATE_PARTITION, flushes, commits, and aborts if anything failed. Each step's
outcome is one line: DELIVERED <partition> <offset> | DELIVERY <partition> <error> | UNDELIVERED <n> |
COMMITTED 0 | ABORTED 0 | EXCEPTION <step> <error>, where <error> is "<name> code=<code> fatal=<bool>
retriable=<bool> abortable=<bool> <message>" (KafkaError's own view: abortable is txn_requires_abort()).

batches: init_transactions, then TXNS transactions of PER_TXN records (record i to partition i % PARTITIONS),
each committed: COMMITTED <t>.

decide: init_transactions, one transaction of N records (record i to partition i % PARTITIONS), with GROUP's
offsets OFFSET + p of every partition p when a group is given (send_offsets_to_transaction, with the group
metadata of a consumer that never joins: generation -1, no member id), then commits or aborts at once:
COMMITTED 0 / ABORTED 0 as soon as the call returned.

read: reads partitions 0..PARTITIONS-1 of TOPIC from the beginning with isolation.level ISOLATION
(read_committed / read_uncommitted) through assign() (no group), up to each partition's end, and prints
{"<partition>": [[offset, key], ...]} as one JSON line.

zombie, batches and decide print READY after init_transactions and DONE at the end; an unexpected exception prints
FAILED <error> and exits 1.
"""
import json
import sys

from read_to_end import read_to_end
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

# Bounds every blocking call: a hung client fails the test with its output rather than hanging it.
CALL_TIMEOUT_S = 20


def say(line):
    print(line, flush=True)


def describe(error):
    """KafkaError as the client classifies it: what the test asserts on."""
    return (
        f"{error.name()} code={error.code()} fatal={error.fatal()} retriable={error.retriable()} "
        f"abortable={error.txn_requires_abort()} {error.str()}"
    ).replace("\n", " ")


def producer_for(bootstrap, txn_id):
    return Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "client.id": txn_id,
        "linger.ms": 0,
    })


def send(producer, topic, partition, key):
    """Produces one record and flushes, then prints its delivery report (or that none came).

    A fenced producer's flush() raises the fatal KafkaException, and confluent-kafka runs the delivery
    callback while that exception is already pending: any call into C there (print, str(), err.name())
    fails with SystemError. So the callback only keeps the error; it is printed once flush() is done.
    """
    report = []

    def on_delivery(err, msg):
        report[:] = [err, msg]

    producer.produce(topic, key=key, value=key, partition=partition, on_delivery=on_delivery)
    try:
        remaining = producer.flush(CALL_TIMEOUT_S)
    finally:
        if report and report[0] is None:
            say(f"DELIVERED {partition} {report[1].offset()}")
        elif report:
            say(f"DELIVERY {partition} {describe(report[0])}")
    if remaining > 0:
        say(f"UNDELIVERED {remaining}")


def zombie(producer, topic, prefix, n, late_partition):
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, key=f"{prefix}-0-{i}", value=f"{prefix}-0-{i}", partition=0)
    if producer.flush(CALL_TIMEOUT_S) > 0:
        raise RuntimeError("the open transaction's records were not delivered")
    say("OPEN")
    if sys.stdin.readline() == "":
        sys.exit(3)

    failed = False
    try:
        send(producer, topic, late_partition, f"{prefix}-0-late")
    except KafkaException as e:
        failed = True
        say(f"EXCEPTION send {describe(e.args[0])}")
    try:
        producer.commit_transaction(CALL_TIMEOUT_S)
        say("COMMITTED 0")
    except KafkaException as e:
        failed = True
        say(f"EXCEPTION commit {describe(e.args[0])}")
    if failed:
        try:
            producer.abort_transaction(CALL_TIMEOUT_S)
            say("ABORTED 0")
        except KafkaException as e:
            say(f"EXCEPTION abort {describe(e.args[0])}")


def batches(producer, topic, prefix, partitions, txns, per_txn):
    for t in range(txns):
        producer.begin_transaction()
        for i in range(per_txn):
            producer.produce(topic, key=f"{prefix}-{t}-{i}", value=f"{prefix}-{t}-{i}", partition=i % partitions)
        producer.commit_transaction(CALL_TIMEOUT_S)
        say(f"COMMITTED {t}")


def decide(producer, bootstrap, topic, prefix, partitions, n, end, group=None, offset=0):
    producer.begin_transaction()
    for i in range(n):
        producer.produce(topic, key=f"{prefix}-0-{i}", value=f"{prefix}-0-{i}", partition=i % partitions)
    # Every record in the log before the decision: abort_transaction purges what is still queued or in
    # flight, so without this an abort could end a transaction whose records were never written.
    remaining = producer.flush(CALL_TIMEOUT_S)
    if remaining > 0:
        raise SystemExit(f"{remaining} records not delivered before the decision")
    if group is not None:
        # The group's metadata comes from a consumer; one that never subscribes sends the offsets as a
        # copier outside the group would (generation -1).
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            offsets = [TopicPartition(topic, p, offset + p) for p in range(partitions)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        finally:
            consumer.close()
    if end == "commit":
        producer.commit_transaction(CALL_TIMEOUT_S)
        say("COMMITTED 0")
    else:
        producer.abort_transaction(CALL_TIMEOUT_S)
        say("ABORTED 0")


def read(bootstrap, topic, partitions, isolation):
    say(json.dumps(read_to_end(bootstrap, topic, partitions, isolation, lambda msg: [msg.offset(), msg.key().decode()])))


def main():
    mode, bootstrap, topic = sys.argv[1:4]
    a = sys.argv[4:]
    if mode == "read":
        read(bootstrap, topic, int(a[0]), a[1])
        return
    if mode not in ("zombie", "batches", "decide"):
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    producer = producer_for(bootstrap, a[0])
    try:
        producer.init_transactions(CALL_TIMEOUT_S)
        say("READY")
        if mode == "zombie":
            zombie(producer, topic, a[1], int(a[2]), int(a[3]))
        elif mode == "decide":
            group = (a[5], int(a[6])) if len(a) > 6 else ()
            decide(producer, bootstrap, topic, a[1], int(a[2]), int(a[3]), a[4], *group)
        else:
            batches(producer, topic, a[1], int(a[2]), int(a[3]), int(a[4]))
        say("DONE")
    except KafkaException as e:
        say(f"FAILED {describe(e.args[0])}")
        sys.exit(1)
    # A fenced producer has nothing left to deliver; bounded anyway.
    producer.flush(5)


if __name__ == "__main__":
    main()
