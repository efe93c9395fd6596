"""librdkafka (through confluent-kafka) over TLS: produce COUNT keyed messages with the idempotent producer,
then read them back with a consumer in a group (FindCoordinator, JoinGroup, commits: every request over
TLS), with a client certificate when CERT and KEY are given.

    tls_produce_consume.py BOOTSTRAP TOPIC COUNT CA [CERT KEY]

The topic (one partition) must exist. Prints one JSON object on stdout:
    {"librdkafka": "2.x", "delivered": N, "errors": [...], "consumed": [[key, value], ...]}
and exits 0 when the script ran (the caller judges the results), non-zero when it could not run.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, libversion


def log(message):
    print(message, file=sys.stderr, flush=True)


def tls_config(ca, cert, key):
    config = {"security.protocol": "ssl", "ssl.ca.location": ca, "ssl.endpoint.identification.algorithm": "https"}
    if cert is not None:
        config["ssl.certificate.location"] = cert
        config["ssl.key.location"] = key
    return config


def main():
    bootstrap, topic, count, ca = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cert = sys.argv[5] if len(sys.argv) > 5 else None
    key = sys.argv[6] if len(sys.argv) > 6 else None
    tls = tls_config(ca, cert, key)
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
        **tls,
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 30000,
        "error_cb": on_error,
    })
    for i in range(count):
        producer.produce(topic, key=f"key-{i}", value=f"tls-value-{i}", on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)

    consumer = Consumer({
        **tls,
        "bootstrap.servers": bootstrap,
        "group.id": f"{topic}-group",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "error_cb": on_error,
    })
    consumer.subscribe([topic])
    consumed = []
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
