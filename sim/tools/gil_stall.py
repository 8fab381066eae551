"""How long a simulator tick waits for the GIL: ten MuJoCo steps (one 20 ms
control tick of 2 ms steps) stepped one call at a time, as the simulator
does to latch every contact, beside N busy Python threads (the ROS
executor's callbacks), at the interpreter's default switch interval and
at the simulator's (aicc_sim.GIL_SWITCH_INTERVAL_S). Prints figures; asserts
nothing.

    scripts/ros-env python3 sim/tools/gil_stall.py [BUSY_THREADS] [TICKS]
"""
import os
import sys
import threading
import time

import mujoco

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from aicc_sim import GIL_SWITCH_INTERVAL_S  # noqa: E402

XML = ("<mujoco><option timestep='0.002'/><worldbody><geom type='plane' size='5 5 .1'/>"
       + "".join(f"<body pos='{i * 0.3} 0 0.5'><freejoint/><geom type='box' size='.1 .1 .1'/></body>"
                 for i in range(10))
       + "</worldbody></mujoco>")
STEPS_PER_TICK = 10


def busy(stop: list) -> None:
    count = 0
    while not stop[0]:
        count += 1


def measure(busy_threads: int, interval_s: float, ticks: int) -> tuple[float, float]:
    model = mujoco.MjModel.from_xml_string(XML)
    data = mujoco.MjData(model)
    sys.setswitchinterval(interval_s)
    stop = [False]
    threads = [threading.Thread(target=busy, args=(stop,)) for _ in range(busy_threads)]
    for thread in threads:
        thread.start()
    took = []
    for _ in range(ticks):
        started = time.perf_counter()
        for _ in range(STEPS_PER_TICK):
            mujoco.mj_step(model, data)
        took.append(time.perf_counter() - started)
    stop[0] = True
    for thread in threads:
        thread.join()
    return sum(took) / len(took), max(took)


def main() -> None:
    busy_threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    ticks = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    for threads in (0, busy_threads):
        for interval_s in (0.005, GIL_SWITCH_INTERVAL_S):
            mean_s, worst_s = measure(threads, interval_s, ticks)
            print(f"{threads} busy thread(s), switch interval {interval_s * 1e3:.1f} ms: "
                  f"a tick of {STEPS_PER_TICK} steps took {mean_s * 1e3:.1f} ms on average, {worst_s * 1e3:.1f} ms at worst "
                  f"({ticks} ticks)", flush=True)


if __name__ == "__main__":
    main()
