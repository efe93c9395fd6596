"""Reads a compacted topic with librdkafka (confluent-kafka), for tests/interop/compacted-topics.test.ts.

    compacted_read.py BOOTSTRAP TOPIC PARTITIONS ISOLATION[,ISOLATION...]

For each isolation level, reads partitions 0..PARTITIONS-1 from the beginning to their end through assign()
(no group) and prints one JSON line {"isolation": ISOLATION, "records": {"<partition>": [[offset, key,
value], ...]}}, value null for a tombstone.
"""
import json
import sys

from read_to_end import read_to_end


def text(b):
    return None if b is None else b.decode("utf-8")


def main():
    bootstrap, topic, partitions, isolations = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    for isolation in isolations.split(","):
        records = read_to_end(bootstrap, topic, partitions, isolation, lambda m: [m.offset(), text(m.key()), text(m.value())])
        print(json.dumps({"isolation": isolation, "records": records}), flush=True)


if __name__ == "__main__":
    main()
