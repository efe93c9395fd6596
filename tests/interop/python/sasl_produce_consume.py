"""librdkafka (through confluent-kafka) over SASL_PLAINTEXT: produce COUNT keyed messages with the
idempotent producer, then read them back with a consumer in a group (every request after the SASL
exchange), authenticating with MECHANISM as USER / PASSWORD.

    sasl_produce_consume.py BOOTSTRAP TOPIC COUNT MECHANISM USER PASSWORD

The topic (one partition) must exist. Prints one JSON object on stdout:
    {"librdkafka": "2.x", "delivered": N, "errors": [...], "consumed": [[key, value], ...]}
and exits 0 when the script ran (the caller judges the results), non-zero when it could not run. With a
wrong password the producer's errors hold librdkafka's authentication error and nothing is delivered.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, libversion


def log(message):
    print(message, file=sys.stderr, flush=True)


def main():
    bootstrap, topic, count, mechanism, user, password = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
    sasl = {"security.protocol": "sasl_plaintext", "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password}
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
        **sasl,
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 15000,
        "error_cb": on_error,
    })
    for i in range(count):
        producer.produce(topic, key=f"key-{i}", value=f"sasl-value-{i}", on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(20)
    consumed = []
    if delivered:
        consumer = Consumer({
            **sasl,
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
