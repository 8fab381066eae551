"""Reads a recording of the bridge with the MCAP Python library and its ROS 2
decoder (mcap, mcap-ros2-support: readers the project did not write) and
prints one JSON document: each channel (schema name and encoding, message
encoding, count), the JSON messages of the /aicc channels, the log times of
the decoded ROS messages per topic, and every decoded sensor_msgs/Image with
its header, size, encoding and pixels (base64)."""
import base64
import json
import sys

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


def main(path):
    out = {"channels": {}, "json": [], "images": [], "decoded": {}, "log_times": {}}
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for schema, channel, message in reader.iter_messages():
            entry = out["channels"].setdefault(channel.topic, {
                "schema": schema.name if schema else None,
                "schema_encoding": schema.encoding if schema else None,
                "message_encoding": channel.message_encoding,
                "count": 0,
            })
            entry["count"] += 1
            if channel.message_encoding == "json":
                out["json"].append({"topic": channel.topic, "data": json.loads(message.data)})
        cdr = [t for t, c in out["channels"].items() if c["message_encoding"] == "cdr"]
        for schema, channel, message, decoded in reader.iter_decoded_messages(topics=cdr):
            out["decoded"][channel.topic] = out["decoded"].get(channel.topic, 0) + 1
            out["log_times"].setdefault(channel.topic, []).append(message.log_time)
            if schema.name == "sensor_msgs/msg/Image":
                out["images"].append({
                    "topic": channel.topic,
                    "stamp_s": decoded.header.stamp.sec + decoded.header.stamp.nanosec * 1e-9,
                    "frame_id": decoded.header.frame_id,
                    "width": decoded.width,
                    "height": decoded.height,
                    "encoding": decoded.encoding,
                    "step": decoded.step,
                    "data_b64": base64.b64encode(bytes(decoded.data)).decode("ascii"),
                })
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
