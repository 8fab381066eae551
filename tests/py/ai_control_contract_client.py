#!/usr/bin/env python3
"""An AI-control client written from the contract alone
(/work/shared/seeds/ai-control-protocol-contract.json, protocol version 1),
sharing no code with the bridge it tests.

As the contract's reference client does, it opens one TCP connection per
request: connect, `auth` when a token is set (read from an environment
variable, never an argument), the request, its one response line, close.
Responses are checked strictly (UTF-8 JSON object, jsonrpc "2.0", the id
sent, exactly one of result or error, at most 1 MiB) and a malformed one
is an error, never consumed.

Commands (each prints one JSON line on stdout):
  request METHOD [PARAMS_JSON]   any method
  act --type T [--x N] [--y N] [--int-arg N] [--string-arg S] [--append]
  poll --for-s S [--interval-s S] [--after N]
                                 polls `events` every interval for S seconds
                                 (one connection per poll), then prints every
                                 event seen and when the last poll was sent
  wait-completed SEQ [SEQ...] --within-s S
                                 polls `events` until a command_completed of
                                 each SEQ was seen; prints them
Exit status: 0 done, 1 a transport or contract failure, 2 a JSON-RPC error
answer (printed as {"error": {...}}).
"""
import argparse
import json
import os
import socket
import sys
import time

JSONRPC_VERSION = "2.0"
MAX_LINE_BYTES = 1024 * 1024
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 43011


class ContractError(Exception):
    """The peer broke the contract (or the transport failed)."""


class RemoteError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def read_line(sock, deadline):
    data = bytearray()
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ContractError("no complete response line in time")
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            raise ContractError("the bridge closed the connection before a complete response line")
        data.extend(chunk)
        if len(data) > MAX_LINE_BYTES + 1:
            raise ContractError("response exceeds the contract's line limit")
    line, _, rest = bytes(data).partition(b"\n")
    if rest:
        raise ContractError("more than one response line for one request")
    return line


def exchange(sock, request_id, method, params, deadline):
    payload = json.dumps({"jsonrpc": JSONRPC_VERSION, "id": request_id, "method": method, "params": params or {}}).encode("utf-8")
    if len(payload) > MAX_LINE_BYTES:
        raise ContractError("request exceeds the configured line limit")
    sock.sendall(payload + b"\n")
    line = read_line(sock, deadline)
    try:
        response = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ContractError(f"response is not valid UTF-8 JSON: {error}")
    if not isinstance(response, dict):
        raise ContractError("response is not a JSON object")
    if response.get("jsonrpc") != JSONRPC_VERSION:
        raise ContractError(f"response has an unsupported jsonrpc value: {response.get('jsonrpc')!r}")
    if response.get("id") != request_id:
        raise ContractError(f"response id does not match the request ({response.get('id')!r} for {request_id!r})")
    if ("result" in response) == ("error" in response):
        raise ContractError("response must contain exactly one of result or error")
    if "error" in response:
        error = response["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int) or not isinstance(error.get("message"), str):
            raise ContractError("error must hold an integer code and a string message")
        raise RemoteError(error["code"], error["message"])
    return response["result"]


def request(host, port, method, params=None, token=None, timeout_s=30.0):
    """One request on a connection of its own (as the reference client)."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        if token:
            authorized = exchange(sock, 1, "auth", {"token": token}, deadline)
            if authorized.get("authorized") is not True:
                raise ContractError("the token was not accepted")
        return exchange(sock, 2, method, params, deadline)


def command_fields(args):
    command = {"type": args.type}
    for name, field in [("x", "x"), ("y", "y"), ("int_arg", "intArg"), ("string_arg", "stringArg")]:
        value = getattr(args, name)
        if value is not None:
            command[field] = value
    if args.append:
        command["append"] = True
    return command


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--token-env", default="FONLINE_AI_TOKEN", help="environment variable holding the token")
    parser.add_argument("--timeout-s", type=float, default=30.0)
    sub = parser.add_subparsers(dest="command", required=True)
    raw = sub.add_parser("request")
    raw.add_argument("method")
    raw.add_argument("params", nargs="?", default="{}")
    act = sub.add_parser("act")
    act.add_argument("--type", required=True)
    act.add_argument("--x", type=int)
    act.add_argument("--y", type=int)
    act.add_argument("--int-arg", type=int)
    act.add_argument("--string-arg")
    act.add_argument("--append", action="store_true")
    poll = sub.add_parser("poll")
    poll.add_argument("--for-s", type=float, required=True)
    poll.add_argument("--interval-s", type=float, default=0.25)
    poll.add_argument("--after", type=int, default=0)
    waiting = sub.add_parser("wait-completed")
    waiting.add_argument("seqs", type=int, nargs="+")
    waiting.add_argument("--within-s", type=float, default=60.0)
    args = parser.parse_args()
    token = os.environ.get(args.token_env, "")

    def call(method, params=None):
        return request(args.host, args.port, method, params, token, args.timeout_s)

    try:
        if args.command == "request":
            result = call(args.method, json.loads(args.params))
        elif args.command == "act":
            result = call("act", command_fields(args))
        elif args.command == "poll":
            cursor, events, last_sent = args.after, [], None
            end = time.monotonic() + args.for_s
            while time.monotonic() < end:
                last_sent = time.time()
                page = call("events", {"afterSeq": cursor, "limit": 500})
                for entry in page["events"]:
                    cursor = max(cursor, entry["seq"])
                    events.append(entry)
                time.sleep(args.interval_s)
            result = {"events": events, "cursor": cursor, "last_poll_unix_s": last_sent}
        else:
            wanted, found, cursor = set(args.seqs), {}, 0
            end = time.monotonic() + args.within_s
            while wanted - set(found):
                if time.monotonic() > end:
                    raise ContractError(f"no command_completed for {sorted(wanted - set(found))} within {args.within_s} s")
                page = call("events", {"afterSeq": cursor, "limit": 500})
                for entry in page["events"]:
                    cursor = max(cursor, entry["seq"])
                    event = entry["event"]
                    if event.get("type") == "command_completed" and event.get("commandSeq") in wanted:
                        found[event["commandSeq"]] = event
                time.sleep(0.1)
            result = {"completed": [found[seq] for seq in args.seqs]}
    except RemoteError as error:
        print(json.dumps({"error": {"code": error.code, "message": error.message}}))
        return 2
    except (ContractError, OSError) as error:
        print(json.dumps({"failure": str(error)}))
        return 1
    print(json.dumps({"result": result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
