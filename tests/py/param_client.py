"""A parameter client written against rcl_interfaces, as `ros2 param` is:
lists, gets, describes and sets parameters of the node NODE, and prints
what it saw as one JSON object. Usage: param_client.py /ns/node"""
import json
import sys

import rclpy
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import DescribeParameters, GetParameters, ListParameters, SetParameters


def call(node, kind, name, request):
    client = node.create_client(kind, name)
    if not client.wait_for_service(timeout_sec=20.0):
        raise SystemExit(f"no service {name}")
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=20.0)
    if future.result() is None:
        raise SystemExit(f"no answer from {name}")
    return future.result()


def value_json(value):
    kinds = {ParameterType.PARAMETER_BOOL: "bool_value", ParameterType.PARAMETER_INTEGER: "integer_value",
             ParameterType.PARAMETER_DOUBLE: "double_value", ParameterType.PARAMETER_STRING: "string_value",
             ParameterType.PARAMETER_STRING_ARRAY: "string_array_value"}
    field = kinds.get(value.type)
    got = getattr(value, field) if field else None
    return list(got) if field == "string_array_value" else got


def main():
    target = sys.argv[1]
    rclpy.init()
    node = rclpy.create_node("param_client")
    out = {}
    listed = call(node, ListParameters, f"{target}/list_parameters", ListParameters.Request())
    out["names"] = list(listed.result.names)
    names = ["tick_rate_hz", "world_name", "base.max_linear_mps", "sensors.battery_low_fraction", "use_sim_time"]
    got = call(node, GetParameters, f"{target}/get_parameters", GetParameters.Request(names=names))
    out["values"] = {n: value_json(v) for n, v in zip(names, got.values)}
    described = call(node, DescribeParameters, f"{target}/describe_parameters", DescribeParameters.Request(names=names))
    out["descriptors"] = {d.name: {"read_only": d.read_only, "description": d.description, "type": d.type,
                                   "float_range": [[r.from_value, r.to_value] for r in d.floating_point_range]}
                          for d in described.descriptors}

    def set_one(name, value):
        parameter = Parameter(name=name, value=value)
        result = call(node, SetParameters, f"{target}/set_parameters", SetParameters.Request(parameters=[parameter]))
        return {"successful": result.results[0].successful, "reason": result.results[0].reason}

    out["set_live"] = set_one("sensors.battery_low_fraction", ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=0.3))
    out["set_read_only"] = set_one("base.max_linear_mps", ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=1.0))
    out["set_wrong_type"] = set_one("sensors.battery_low_fraction", ParameterValue(type=ParameterType.PARAMETER_STRING, string_value="high"))
    out["set_out_of_range"] = set_one("sensors.battery_low_fraction", ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=1.5))
    out["set_unknown"] = set_one("base.warp_factor", ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=9.0))
    after = call(node, GetParameters, f"{target}/get_parameters", GetParameters.Request(names=["sensors.battery_low_fraction", "base.max_linear_mps"]))
    out["after"] = [value_json(v) for v in after.values]
    print(json.dumps(out))
    node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
