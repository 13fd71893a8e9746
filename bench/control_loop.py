"""Control-thread cost of the remote engine: get_action / notify_observation p50/p99 (microseconds).

Scenarios: (a) worker busy streaming from a real server, (b) server down (engine reconnecting),
(c) server SIGSTOPped (request-timeout path). Needs a running router + `lerobot-policy-server`
serving --model at --task; the script starts/stops nothing but SIGSTOP/SIGCONT of --server_pid.

    python bench/control_loop.py --endpoint tcp/127.0.0.1:17447 --model /tmp/e2e/act --task pick --server_pid PID
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time

import lerobot.rollout  # noqa: F401
import numpy as np
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.utils.feature_utils import hw_to_dataset_features

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.sim.robot import SimArm, SimArmConfig


def measure(engine: RemoteInferenceEngine, robot: SimArm, seconds: float) -> dict[str, tuple[float, float]]:
    get_t, note_t = [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        obs = robot.get_observation()
        t0 = time.perf_counter_ns()
        engine.notify_observation(obs)
        t1 = time.perf_counter_ns()
        engine.get_action(None)
        t2 = time.perf_counter_ns()
        note_t.append((t1 - t0) / 1e3)
        get_t.append((t2 - t1) / 1e3)
        time.sleep(1 / 30)
    p = lambda xs: (float(np.percentile(xs, 50)), float(np.percentile(xs, 99)))  # noqa: E731
    return {"get_action": p(get_t), "notify_observation": p(note_t), "n": len(get_t)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--task", default="pick")
    ap.add_argument("--server_pid", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=8.0)
    a = ap.parse_args()
    robot = SimArm(SimArmConfig())
    robot.connect()
    obs_hw = {k: v for k, v in robot.observation_features.items()}
    hw = hw_to_dataset_features(obs_hw, "observation")
    cfg = RemoteInferenceConfig(
        connect_endpoint=a.endpoint, rtc=RTCConfig(enabled=False), request_timeout_s=1.0, max_offline_s=600
    )
    e = RemoteInferenceEngine(
        cfg,
        hw_features=hw,
        ordered_action_keys=list(robot.action_features),
        task=a.task,
        fps=30,
        model_id=a.model,
        shutdown_event=threading.Event(),
    )
    e.reset()
    e.start()
    e.resume()
    print("busy (streaming):", measure(e, robot, a.seconds), "state", e.state.value)
    if a.server_pid:
        os.kill(a.server_pid, signal.SIGSTOP)
        try:
            print("server SIGSTOPped:", measure(e, robot, a.seconds), "state", e.state.value)
        finally:
            os.kill(a.server_pid, signal.SIGCONT)
        time.sleep(2)
        os.kill(a.server_pid, signal.SIGTERM)
        time.sleep(2)
        print("server down:", measure(e, robot, a.seconds), "state", e.state.value)
    e.stop()


if __name__ == "__main__":
    main()
