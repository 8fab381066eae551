"""An MCP host made of the official MCP Python SDK (PyPI `mcp`), driving
`aicc mcp` over stdio or streamable HTTP. It does what a host does and
reports what it saw as JSON lines on stdout (one per step); the Rust test
that runs it asserts on them and on the robot's ground truth. Where the
robot must change under it (the camera stopping), it prints a
`{"wait": ...}` line and waits for a line on stdin.

    host.py stdio -- /path/to/aicc --port 43010 mcp
    host.py http http://127.0.0.1:PORT/mcp [--token-env VAR]

Steps: --steps basic (initialize, tools, sensors, errors, a short move),
full (also cancel mid-move, events, the resource, tools/list_changed),
sim (sensors, a move and a cancelled move with pauses for ground truth), or
approval (a move that waits for an operator's approval). --elicit accept,
reject (accept with approve: false) or decline: the host declares the
elicitation capability and its user answers so; none (the default): the
host has no elicitation capability.
"""

import argparse
import json
import os
import sys
import time

import anyio
import jsonschema
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def report(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def dump(result):
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


class Elicitations:
    """The host's user: records each elicitation and answers it as told."""

    def __init__(self, answer):
        self.answer = answer
        self.seen = []

    async def __call__(self, context, params):
        self.seen.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"approve": True, "reason": "the path is clear"})
        if self.answer == "reject":
            return types.ElicitResult(action="accept", content={"approve": False})
        return types.ElicitResult(action="decline")


class Notifications:
    """Counts the notifications the server sends, and wakes waiters."""

    def __init__(self):
        self.tools_changed = 0
        self.resources_updated = 0
        self.changed = anyio.Event()

    async def __call__(self, message):
        if isinstance(message, Exception):
            return
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed += 1
        elif isinstance(message, types.ResourceUpdatedNotification):
            self.resources_updated += 1
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_for(self, condition, timeout_s):
        with anyio.move_on_after(timeout_s):
            while not condition():
                await self.changed.wait()
        return condition()


async def wait_for_line(expected):
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    if line.strip() != expected:
        raise SystemExit(f"expected {expected!r} on stdin, got {line!r}")


def proprioception_x(result):
    return ((result.structured_content or {}).get("position_m") or {}).get("x")


async def call_with_progress(session, tool, arguments):
    progress = []

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})

    started = time.monotonic()
    result = await session.call_tool(tool, arguments, progress_callback=on_progress)
    return result, progress, time.monotonic() - started


async def cancel_mid_move(session, arguments, cancel_after_progress):
    """Starts a move and cancels it (MCP cancellation) once it has made
    `cancel_after_progress` of progress; returns what was seen."""
    progress = []
    moving = anyio.Event()
    outcome = {}

    async def on_progress(value, total, message):
        progress.append({"progress": value, "total": total, "message": message})
        if value >= cancel_after_progress:
            moving.set()

    async def run(scope_holder):
        with anyio.CancelScope() as scope:
            scope_holder.append(scope)
            outcome["result"] = dump(await session.call_tool("move", arguments, progress_callback=on_progress))

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        holder = []
        group.start_soon(run, holder)
        with anyio.move_on_after(20):
            await moving.wait()
        cancelled_at = time.monotonic() - started
        holder[0].cancel()
    return {"progress": progress, "cancelled_at_s": cancelled_at, "finished_before_cancel": "result" in outcome, "result": outcome.get("result")}


async def pause(name):
    """Lets the test look at the robot (ground truth) before going on."""
    report("wait", wait=name)
    await wait_for_line("go")


async def run_sim_steps(session):
    """Against the simulated robot: the test checks moves on ground truth
    at each pause."""
    report("proprioception", result=dump(await session.call_tool("proprioception", {})))
    report("vision", result=dump(await session.call_tool("vision", {"format": "png", "max_width": 160})))
    await pause("before_move")
    result, progress, elapsed = await call_with_progress(session, "move", {"forward": 0.3})
    report("move", result=dump(result), progress=progress, elapsed_s=elapsed)
    await pause("after_move")
    report("cancel", **(await cancel_mid_move(session, {"forward": 1.5}, 0.1)))
    await pause("after_cancel")
    report("invalid_input", result=dump(await session.call_tool("move", {"forward": "far"})))


async def run_approval_steps(session, elicitations):
    """A move long enough to need an operator's approval."""
    before = proprioception_x(await session.call_tool("proprioception", {}))
    result, progress, elapsed = await call_with_progress(session, "move", {"forward": 0.3})
    after = proprioception_x(await session.call_tool("proprioception", {}))
    report("approval_move", result=dump(result), progress=progress, elapsed_s=elapsed, x_before=before, x_after=after,
           elicitations=elicitations.seen if elicitations else [])


async def run_steps(session, steps, notifications, elicitations=None):
    init = await session.initialize()
    report("initialize", protocol_version=init.protocol_version, server=init.server_info.name,
           capabilities=init.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True))

    listed = await session.list_tools()
    schema_errors = []
    for tool in listed.tools:
        for kind, schema in (("inputSchema", tool.input_schema), ("outputSchema", tool.output_schema)):
            if schema is None:
                continue
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as error:
                schema_errors.append(f"{tool.name}.{kind}: {error.message}")
    report("tools", tools=[dump(tool) for tool in listed.tools], schema_errors=schema_errors)

    if steps == "tools":
        # What the LLM is offered, and what calling a withheld tool by name gets.
        refused = {}
        for name in ("approve", "approval_mode", "hold", "record_stop"):
            try:
                await session.call_tool(name, {"approval_id": "x"} if name == "approve" else {"on": False} if name != "record_stop" else {})
                refused[name] = None
            except Exception as error:  # MCPError: a JSON-RPC error answer
                refused[name] = str(error)
        report("withheld", refused=refused)
        return
    if steps == "sim":
        await run_sim_steps(session)
        return
    if steps == "approval":
        await run_approval_steps(session, elicitations)
        return

    # The SDK validates structuredContent against each outputSchema itself.
    report("proprioception", result=dump(await session.call_tool("proprioception", {})))
    report("vision", result=dump(await session.call_tool("vision", {"format": "png", "max_width": 64})))
    report("depth", result=dump(await session.call_tool("depth", {})))
    report("invalid_input", result=dump(await session.call_tool("move", {"forward": "far"})))
    try:
        await session.call_tool("teleport", {})
        report("unknown_tool", error=None)
    except Exception as error:  # MCPError: a JSON-RPC error answer
        report("unknown_tool", error=str(error), code=getattr(getattr(error, "error", None), "code", None))

    before = proprioception_x(await session.call_tool("proprioception", {}))
    result, progress, elapsed = await call_with_progress(session, "move", {"forward": 0.3})
    after = proprioception_x(await session.call_tool("proprioception", {}))
    report("move", result=dump(result), progress=progress, elapsed_s=elapsed, x_before=before, x_after=after)

    if steps == "basic":
        return

    before = proprioception_x(await session.call_tool("proprioception", {}))
    seen = await cancel_mid_move(session, {"forward": 1.5}, 0.1)
    # Still moving? Two readings apart tell.
    await anyio.sleep(0.3)
    first = proprioception_x(await session.call_tool("proprioception", {}))
    await anyio.sleep(0.7)
    second = proprioception_x(await session.call_tool("proprioception", {}))
    report("cancel", **seen, x_before=before, x_after_cancel=first, x_later=second)

    page = await session.call_tool("events", {})
    newer = await session.call_tool("events", {"since": page.structured_content["next"]})
    bad = await session.call_tool("events", {"since": -3})
    report("events", first=dump(page), newer=dump(newer), bad=dump(bad))

    read = await session.read_resource("aicc://events")
    await session.subscribe_resource("aicc://events")
    updates_before = notifications.resources_updated
    await session.call_tool("move", {"forward": 0.05})
    got_update = await notifications.wait_for(lambda: notifications.resources_updated > updates_before, 5)
    report("resource", read=dump(read), updated=got_update)

    changed_before = notifications.tools_changed
    await pause("stop_camera")
    gone = await notifications.wait_for(lambda: notifications.tools_changed > changed_before, 15)
    names_without = [tool.name for tool in (await session.list_tools()).tools]
    await pause("start_camera")
    back = await notifications.wait_for(lambda: notifications.tools_changed > changed_before + 1, 15)
    names_with = [tool.name for tool in (await session.list_tools()).tools]
    report("list_changed", first=gone, second=back, tools_without_camera=names_without, tools_with_camera=names_with)


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("target", nargs="+", help="stdio: the server command; http: the URL")
    parser.add_argument("--steps", choices=["basic", "full", "sim", "approval", "tools"], default="full")
    parser.add_argument("--elicit", choices=["none", "accept", "reject", "decline"], default="none")
    parser.add_argument("--token-env", help="http: the environment variable holding the bearer token")
    args = parser.parse_args()
    notifications = Notifications()
    elicitations = None if args.elicit == "none" else Elicitations(args.elicit)

    if args.transport == "stdio":
        command, *rest = args.target
        server = StdioServerParameters(command=command, args=rest, env=dict(os.environ))
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write, message_handler=notifications, elicitation_callback=elicitations) as session:
                await run_steps(session, args.steps, notifications, elicitations)
    else:
        headers = {}
        if args.token_env:
            headers["Authorization"] = f"Bearer {os.environ[args.token_env]}"
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(args.target[0], http_client=http) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, message_handler=notifications, elicitation_callback=elicitations) as session:
                    await run_steps(session, args.steps, notifications, elicitations)
    report("done")


if __name__ == "__main__":
    anyio.run(main)
