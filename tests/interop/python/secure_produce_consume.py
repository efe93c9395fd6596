"""librdkafka (through confluent-kafka) over a secured listener: produce COUNT keyed messages with the
idempotent producer, then read them back with a consumer in a group (FindCoordinator, JoinGroup, commits:
every request over the same security), with the client settings given as NAME=VALUE arguments
(security.protocol, sasl.* or ssl.*, message.timeout.ms, as librdkafka names them; they win over the
script's own producer defaults).

    secure_produce_consume.py BOOTSTRAP TOPIC COUNT VALUE_PREFIX [NAME=VALUE ...]

Values are VALUE_PREFIX-<i>, keys key-<i>. The topic (one partition) must exist. Prints one JSON object:
    {"librdkafka": "2.x", "delivered": N, "errors": [...], "consumed": [[key, value], ...]}
and exits 0 when the script ran (the caller judges the results), non-zero when it could not run. When
nothing was delivered (a wrong password: the producer's errors hold librdkafka's authentication error) no
consumer is started.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, libversion


def log(message):
    print(message, file=sys.stderr, flush=True)


def main():
    bootstrap, topic, count, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    settings = {}
    for arg in sys.argv[5:]:
        name, sep, value = arg.partition("=")
        if not sep:
            sys.exit(f"not NAME=VALUE: {arg!r}")
        settings[name] = value
    errors = []
    delivered = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.offset())

    def on_error(err):
        errors.append(f"error_cb: {err}")
        log(f"client error: {err}")

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 30000,
        "error_cb": on_error,
        **settings,
    })
    for i in range(count):
        producer.produce(topic, key=f"key-{i}", value=f"{prefix}-{i}", on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)
    consumed = []
    if delivered:
        consumer = Consumer({
            **settings,
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": on_error,
        })
        consumer.subscribe([topic])
        deadline = time.time() + 60
        while len(consumed) < count and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(f"consume: {msg.error()}")
                continue
            consumed.append([msg.key().decode(), msg.value().decode()])
        if consumed:
            consumer.commit(asynchronous=False)
        consumer.close()
    print(json.dumps({"librdkafka": libversion()[0], "delivered": len(delivered), "errors": errors, "consumed": consumed}))


if __name__ == "__main__":
    main()
