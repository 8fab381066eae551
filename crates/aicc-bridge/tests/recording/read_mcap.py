"""Reads an MCAP file with the MCAP Python library (a reader the project did
not write) and prints what it found as one JSON document: the header, the
metadata records, each channel (schema, encodings, count) and every message
(JSON channels decoded as JSON; ROS 2 channels decoded with
mcap-ros2-support, their fields summarised)."""
import json
import sys

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


def ros_summary(decoded):
    """The fields of a decoded ROS message; byte arrays as their length and a checksum."""
    out = {}
    for name in getattr(decoded, "__slots__", []):
        value = getattr(decoded, name)
        if isinstance(value, (bytes, bytearray)):
            out[name] = {"bytes": len(value), "sum": sum(value) % 4294967296}
        elif isinstance(value, (int, float, str, bool)) or value is None:
            out[name] = value
        elif isinstance(value, list) and all(isinstance(v, (int, float, str, bool)) for v in value):
            out[name] = value if len(value) <= 64 else {"items": len(value)}
        elif isinstance(value, list):
            out[name] = [ros_summary(v) for v in value[:16]]
        else:
            out[name] = ros_summary(value)
    return out


def main(path):
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        header = reader.get_header()
        summary = reader.get_summary()
        out = {
            "profile": header.profile,
            "library": header.library,
            "metadata": {m.name: dict(m.metadata) for m in reader.iter_metadata()},
            "message_count": summary.statistics.message_count if summary and summary.statistics else None,
            "channels": {},
            "messages": [],
        }
        for schema, channel, message in reader.iter_messages():
            entry = out["channels"].setdefault(channel.topic, {
                "schema": schema.name if schema else None,
                "schema_encoding": schema.encoding if schema else None,
                "message_encoding": channel.message_encoding,
                "schema_data": schema.data.decode("utf-8", "replace") if schema else None,
                "count": 0,
            })
            entry["count"] += 1
            if channel.message_encoding == "json":
                data = json.loads(message.data)
            else:
                data = None
            out["messages"].append({"topic": channel.topic, "log_time": message.log_time, "data": data})
        for schema, channel, message, decoded in reader.iter_decoded_messages(topics=[t for t, c in out["channels"].items() if c["message_encoding"] == "cdr"]):
            out["messages"].append({"topic": channel.topic, "log_time": message.log_time, "ros": ros_summary(decoded)})
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
