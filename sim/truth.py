"""The simulator's ground truth for judges that speak no ROS: a test stand-in
(a real robot has nothing like it).

`aicc_sim.py --truth-listen 127.0.0.1:PORT` serves newline-delimited JSON
over TCP (port 0 picks a free one; the simulator prints
`AICC_SIM_TRUTH {"host": ..., "port": ...}` before `AICC_SIM_READY`). Each
connection gets one `hello` (what does not change: joint limits from the
URDF, the objects' shapes, the room), then a `state` line at the state rate
(50 Hz) with a strictly increasing `seq`: sim time, the true base pose and
body velocities, the odometry as published (jumps included), every joint's
position, velocity and the velocity its trajectory asks for, every object's
pose, and every contact between a robot geom and a world geom (the floor
aside) at any physics step since the previous state line (latched: a touch
between two lines is never missed).

A connection may send commands, one JSON object a line, each answered by an
`ack` (`{"type": "ack", "id": <its id>, "ok": true, "seq": N}`: the first
state line that shows the command applied is N, or `"ok": false, "error"`):
scenes (`scene`, `reset_world`), faults (`odom_jump`, `odom_reset`, and the
/sim_control commands `pause`, `resume`, `hazard`) and `place` (as
/sim_world). See sim/README.md. Commands are applied by the simulation loop
between two steps, never from the network thread.

A slow reader is dropped, never waited for (its queue holds 10 s of lines):
a judge that reconnects sees the gap in `seq`.
"""

from __future__ import annotations

import json
import time
import math
import queue
import socket
import threading
from dataclasses import dataclass, field

import mujoco
import numpy as np

# Lines one connection may have waiting (10 s at 50 Hz, plus acks).
CLIENT_QUEUE_LINES = 600
# Longest command line accepted from a client.
MAX_COMMAND_BYTES = 64 * 1024
VERSION = 1


@dataclass
class LatchedContact:
    """One robot geom touching one world geom, over the steps since the last readout."""
    robot_geom: str
    robot_body: str
    world_geom: str
    world_body: str
    first_time_s: float
    last_time_s: float
    steps: int = 0
    max_depth_m: float = 0.0
    max_force_n: float = 0.0
    position_m: list = field(default_factory=list)  # where it was deepest (world frame)

    def as_json(self) -> dict:
        return {
            "robot_geom": self.robot_geom, "robot_body": self.robot_body,
            "world_geom": self.world_geom, "world_body": self.world_body,
            "first_time": round(self.first_time_s, 4), "last_time": round(self.last_time_s, 4),
            "steps": self.steps, "max_depth_m": round(self.max_depth_m, 5), "max_force_n": round(self.max_force_n, 3),
            "position": [round(v, 4) for v in self.position_m],
        }


class ContactLatch:
    """Records every robot-world contact (the floor aside) at every physics
    step; `take()` hands over and forgets what was seen since the last take."""

    def __init__(self, sim):
        self.sim = sim
        model = sim.model
        self.is_robot = sim.robot_geom_mask()
        self.is_floor = np.zeros(model.ngeom, dtype=bool)
        self.is_floor[sim.floor_geom_id] = True
        self._names = [model.geom(g).name for g in range(model.ngeom)]
        self._bodies = [model.body(int(model.geom_bodyid[g])).name for g in range(model.ngeom)]
        self._force6 = np.zeros(6)
        self._seen: dict[tuple[int, int], LatchedContact] = {}

    def record(self, sim) -> None:
        data = sim.data
        n = data.ncon
        if n == 0:
            return
        g1 = data.contact.geom1[:n]
        g2 = data.contact.geom2[:n]
        robot1, robot2 = self.is_robot[g1], self.is_robot[g2]
        mixed = (robot1 != robot2) & ~self.is_floor[g1] & ~self.is_floor[g2]
        if not mixed.any():
            return
        now_s = float(data.time)
        for i in np.flatnonzero(mixed):
            i = int(i)
            robot, world = (int(g1[i]), int(g2[i])) if robot1[i] else (int(g2[i]), int(g1[i]))
            contact = data.contact[i]
            depth = max(0.0, -float(contact.dist))
            mujoco.mj_contactForce(sim.model, data, i, self._force6)
            force = float(np.linalg.norm(self._force6[:3]))
            entry = self._seen.get((robot, world))
            if entry is None:
                entry = LatchedContact(self._names[robot], self._bodies[robot], self._names[world], self._bodies[world],
                                       now_s, now_s, position_m=[float(v) for v in contact.pos])
                self._seen[(robot, world)] = entry
            entry.last_time_s = now_s
            entry.steps += 1
            if depth >= entry.max_depth_m:
                entry.max_depth_m = depth
                entry.position_m = [float(v) for v in contact.pos]
            entry.max_force_n = max(entry.max_force_n, force)

    def take(self) -> list[LatchedContact]:
        seen = list(self._seen.values())
        self._seen = {}
        return seen


def _rpy(quat_wxyz) -> tuple[float, float, float]:
    w, x, y, z = (float(v) for v in quat_wxyz)
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return roll, pitch, yaw


def hello_message(sim, world_module, profile_name: str) -> dict:
    """What does not change while the simulator runs."""
    robot = sim.robot
    joints = {}
    for joint in sim.movable_joints:
        joints[joint.name] = {
            "type": joint.type,
            "lower": joint.lower if joint.has_position_limits else None,
            "upper": joint.upper if joint.has_position_limits else None,
            "velocity": joint.velocity,
            "effort": joint.effort,
            "mimic": joint.mimic.joint if joint.mimic is not None else None,
            "parent": joint.parent, "child": joint.child,
        }
    objects = {
        obj.name: {"shape": obj.shape, "size": list(obj.size_m), "color": obj.color, "movable": obj.movable}
        for obj in sim.objects
    }
    return {
        "type": "hello", "version": VERSION, "profile": profile_name, "robot": robot.name,
        "root_link": robot.root_link, "world_frame": "world",
        "room": {"half_size_m": world_module.ROOM_HALF_SIZE_M, "wall_thickness_m": world_module.WALL_THICKNESS_M},
        "joints": joints, "objects": objects,
        "state_fields": "see sim/README.md (ground truth for judges)",
    }


def state_message(seq: int, sim, loop, real_time_factor: float, demand: dict[str, float],
                  contacts: list[LatchedContact]) -> dict:
    position, quat = sim.base_pose()
    linear, angular = sim.base_twist_local()
    roll, pitch, yaw = _rpy(quat)
    odo = loop.odometry
    joints = {
        name: {"position": round(loop.positions[name], 6), "velocity": round(loop.velocities[name], 6),
               "effort": round(loop.efforts[name], 5), "demand_velocity": round(demand.get(name, 0.0), 6)}
        for name in loop.positions
    }
    objects = {name: {"x": round(x, 5), "y": round(y, 5), "z": round(z, 5), "yaw": round(w, 5)}
               for name, (x, y, z, w) in sim.object_poses().items()}
    return {
        "type": "state", "seq": seq, "sim_time": round(sim.time_s, 4), "real_time_factor": round(real_time_factor, 3),
        # This machine's monotonic clock when the state was taken: a bridge
        # beside the simulator limits its commands on that clock, not on sim time.
        "wall_time": round(time.monotonic(), 4),
        "base": {
            "x": float(position[0]), "y": float(position[1]), "z": float(position[2]),
            "roll": roll, "pitch": pitch, "yaw": yaw,
            # In base_footprint (the robot's own frame): x ahead, y left, z up.
            "linear_mps": [float(v) for v in linear], "angular_radps": [float(v) for v in angular],
        },
        "odom": {"x": odo.x_m, "y": odo.y_m, "yaw": odo.yaw_rad, "linear_mps": odo.linear_m_s,
                 "angular_radps": odo.angular_rad_s},
        "joints": joints,
        "objects": objects,
        "contacts": [c.as_json() for c in contacts],
    }


class _Client:
    def __init__(self, conn: socket.socket, server: "TruthServer", hello: bytes):
        self.conn = conn
        self.server = server
        self.lines: queue.Queue[bytes | None] = queue.Queue(CLIENT_QUEUE_LINES)
        self.closed = threading.Event()
        self.lines.put(hello)
        threading.Thread(target=self._write, name="truth-writer", daemon=True).start()
        threading.Thread(target=self._read, name="truth-reader", daemon=True).start()

    def offer(self, line: bytes) -> None:
        """Queues a line; a client that cannot keep up is dropped."""
        if self.closed.is_set():
            return
        try:
            self.lines.put_nowait(line)
        except queue.Full:
            self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        try:
            self.conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.lines.put_nowait(None)
        except queue.Full:
            pass
        self.server.forget(self)

    def _write(self) -> None:
        try:
            while True:
                line = self.lines.get()
                if line is None or self.closed.is_set():
                    break
                self.conn.sendall(line)
        except OSError:
            pass
        finally:
            self.close()
            self.conn.close()

    def _read(self) -> None:
        buffer = b""
        try:
            while not self.closed.is_set():
                chunk = self.conn.recv(4096)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        self.server.command(self, line)
                if len(buffer) > MAX_COMMAND_BYTES:
                    self.offer(_encode({"type": "ack", "id": None, "ok": False,
                                        "error": f"a command line longer than {MAX_COMMAND_BYTES} bytes"}))
                    break
        except OSError:
            pass
        finally:
            self.close()


def _encode(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


class TruthServer:
    """The TCP listener and its connections. `broadcast` and `pending_commands`
    are for the simulation loop; everything else runs on the server's threads."""

    def __init__(self, host: str, port: int, hello: dict):
        self.sock = socket.create_server((host, port), reuse_port=False)
        self.host, self.port = self.sock.getsockname()[:2]
        self.hello = _encode(hello)
        self._lock = threading.Lock()
        self._clients: list[_Client] = []
        self._commands: list[tuple[_Client, object, dict | None, str | None]] = []
        threading.Thread(target=self._accept, name="truth-accept", daemon=True).start()

    @property
    def has_clients(self) -> bool:
        with self._lock:
            return bool(self._clients)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client = _Client(conn, self, self.hello)
            with self._lock:
                self._clients.append(client)

    def forget(self, client: _Client) -> None:
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)

    def command(self, client: _Client, line: bytes) -> None:
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise ValueError("a command is a JSON object")
            problem = None
        except ValueError as error:
            message, problem = None, f"not a JSON object: {error}"
        command_id = message.get("id") if message else None
        with self._lock:
            self._commands.append((client, command_id, message, problem))

    def pending_commands(self):
        """(reply, command or None, problem) for each command received since the last call."""
        with self._lock:
            commands, self._commands = self._commands, []
        for client, command_id, message, problem in commands:
            def reply(ok: bool, error: str | None = None, seq: int | None = None, client=client, command_id=command_id):
                answer = {"type": "ack", "id": command_id, "ok": ok}
                if error is not None:
                    answer["error"] = error
                if seq is not None:
                    answer["seq"] = seq
                client.offer(_encode(answer))
            yield reply, message, problem

    def broadcast(self, message: dict) -> None:
        with self._lock:
            clients = list(self._clients)
        if not clients:
            return
        line = _encode(message)
        for client in clients:
            client.offer(line)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            client.close()
