"""Idempotent librdkafka producer (confluent-kafka) for tests/fault/idempotent-crash.test.ts.

Produces --count messages at about --rate per second with enable.idempotence=true and acks=all while the
test kills and restarts the broker. Message i has key "py-<i>" and value "py-<i, 6 digits>", so the test can
check every one. Writes a JSON report to --out:

  {"count": N, "delivered": D, "failed": [{"index": i, "error": "..."}], "fatal": "..." | null,
   "errors": ["..."], "reports": [[index, partition, offset], ...], "elapsed_s": s}

"reports" holds every successful delivery report (the broker's acknowledgement with its offset).
Exit status: 0 when every message was delivered and no fatal error was raised, 1 otherwise, 2 on bad usage.
"""

import argparse
import json
import sys
import time

from confluent_kafka import KafkaError, KafkaException, Producer


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--rate", type=float, default=2000.0, help="messages per second")
    parser.add_argument("--out", required=True)
    parser.add_argument("--flush-timeout-s", type=float, default=150.0)
    args = parser.parse_args()

    errors: list[str] = []
    fatal: list[str] = []
    failed: list[dict] = []
    reports: list[list[int]] = []

    def on_error(err: KafkaError) -> None:
        # Connection refusals while the broker is down arrive here too; only fatal ones fail the run.
        text = f"{err.name()}: {err.str()}"
        if err.fatal():
            fatal.append(text)
            print(f"FATAL {text}", file=sys.stderr, flush=True)
        else:
            errors.append(text)

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "client.id": "bunka-fault-librdkafka",
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": 120000,
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 5,
            # The broker comes back within a second; do not back off for librdkafka's default 10 s.
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "error_cb": on_error,
        }
    )

    def delivered(index: int):
        def callback(err, msg) -> None:
            if err is not None:
                failed.append({"index": index, "error": f"{err.name()}: {err.str()}"})
            else:
                reports.append([index, msg.partition(), msg.offset()])

        return callback

    started = time.monotonic()
    for i in range(args.count):
        if fatal:
            break
        # Pace the sends: message i goes out no earlier than i / rate seconds after the start.
        due = started + i / args.rate
        while True:
            now = time.monotonic()
            if now >= due:
                break
            producer.poll(min(due - now, 0.05))
        while True:
            try:
                producer.produce(args.topic, key=f"py-{i}", value=f"py-{i:06d}", on_delivery=delivered(i))
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as e:
                fatal.append(f"produce raised {e}")
                break
        producer.poll(0)

    remaining = producer.flush(args.flush_timeout_s)
    elapsed = time.monotonic() - started
    report = {
        "count": args.count,
        "delivered": len(reports),
        "failed": failed,
        "fatal": fatal[0] if fatal else None,
        "errors": errors,
        "undelivered_after_flush": remaining,
        "reports": reports,
        "elapsed_s": round(elapsed, 3),
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f)
    print(
        f"idempotent_producer: {len(reports)}/{args.count} delivered, {len(failed)} failed, "
        f"{remaining} undelivered, fatal={report['fatal']}, {len(errors)} non-fatal errors, {elapsed:.1f} s",
        flush=True,
    )
    ok = len(reports) == args.count and not failed and not fatal and remaining == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
