"""
librdkafka's AlterConfigs (confluent-kafka's AdminClient.alter_configs, AlterConfigs API key 33) and
DescribeConfigs against a broker: replaces a topic's configs, checks validate_only and a refusal, and
replaces the broker's own dynamic configs. Prints one JSON object with what the client reported, for the
test to judge: python alter_configs.py BOOTSTRAP TOPIC BROKER_ID
"""
import json
import sys
import warnings

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

# alter_configs is deprecated in favour of incremental_alter_configs, but it is what this checks.
warnings.filterwarnings("ignore", category=DeprecationWarning)
bootstrap, topic, broker_id = sys.argv[1], sys.argv[2], sys.argv[3]
admin = AdminClient({"bootstrap.servers": bootstrap})
TIMEOUT = 30


def alter(resource, validate_only=False):
    """None when the broker accepted the change, else [error name, message]."""
    future = admin.alter_configs([resource], request_timeout=TIMEOUT, validate_only=validate_only)[resource]
    try:
        future.result(timeout=TIMEOUT)
        return None
    except KafkaException as error:
        err = error.args[0]
        return [err.name(), err.str()]


def describe(resource, names):
    """The named configs of a resource: value and source name."""
    entries = admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(timeout=TIMEOUT)
    return {name: [entries[name].value, entries[name].source] for name in names}


topic_resource = lambda configs: ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
broker_resource = lambda configs: ConfigResource(ResourceType.BROKER, broker_id, set_config=configs)
NAMES = ["cleanup.policy", "min.cleanable.dirty.ratio", "retention.ms", "segment.ms"]

result = {}
result["set"] = alter(topic_resource({"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.1", "retention.ms": "60000"}))
result["after_set"] = describe(ConfigResource(ResourceType.TOPIC, topic), NAMES)
# AlterConfigs replaces: the configs not named go back to their defaults.
result["replace"] = alter(topic_resource({"segment.ms": "120000"}))
result["after_replace"] = describe(ConfigResource(ResourceType.TOPIC, topic), NAMES)
result["validate_only"] = alter(topic_resource({"cleanup.policy": "compact"}), validate_only=True)
result["invalid"] = alter(topic_resource({"min.cleanable.dirty.ratio": "2"}))
result["after_refusals"] = describe(ConfigResource(ResourceType.TOPIC, topic), NAMES)
result["broker_set"] = alter(broker_resource({"log.cleaner.backoff.ms": "1000", "log.cleaner.threads": "2"}))
result["broker_after_set"] = describe(ConfigResource(ResourceType.BROKER, broker_id), ["log.cleaner.backoff.ms", "log.cleaner.threads"])
result["broker_static"] = alter(broker_resource({"log.cleaner.enable": "false"}))
result["broker_clear"] = alter(broker_resource({}))
result["broker_after_clear"] = describe(ConfigResource(ResourceType.BROKER, broker_id), ["log.cleaner.backoff.ms", "log.cleaner.threads"])
print(json.dumps(result))
