"""Robot-side fault timings with real processes: one router, `lerobot-policy-server` processes,
one `RemoteInferenceEngine` driven by a 30 Hz control loop on a sim arm (one 48x64 camera).

Faults, each repeated `--trials` times; times come from the engine's own state history (monotonic):
- kill9:   server SIGKILL -> robot leaves STREAMING; replacement's token appears -> STREAMING again
- sigstop: server SIGSTOP (lease 10 s: only the request in flight can tell) -> DEGRADED, then STALLED
- router:  router SIGKILL + restart on the same port; router listening -> STREAMING again
- drain:   SIGTERM (drain) of the serving replica with a spare up -> STREAMING on the spare
Over the whole run every executed action is checked: older than max_action_age_s, NaN, or from a
session the robot did not open with its pinned model fingerprint -> counted (the aim is 0).

    .venv/bin/python -c 'from lerobot_policy_remote.testing.policies import save_tiny_act; save_tiny_act(
        "/tmp/fo/act", cameras={"front": (48, 64)}, chunk_size=50)'
    .venv/bin/python bench/failover.py --model /tmp/fo/act --trials 10
"""

from __future__ import annotations

import argparse
import signal
import statistics
import threading
import time
import uuid

import lerobot.rollout  # noqa: F401  (registers the remote engine and the sim robots)
from lerobot.policies.rtc.configuration_rtc import RTCConfig
from lerobot.utils.feature_utils import hw_to_dataset_features

from lerobot_policy_remote.engine.config import RemoteInferenceConfig
from lerobot_policy_remote.engine.link import LinkState
from lerobot_policy_remote.engine.remote import RemoteInferenceEngine
from lerobot_policy_remote.sim.robot import SimArm, SimArmConfig, SimCameraConfig
from lerobot_policy_remote.testing import Proc, Router, wait_until
from lerobot_policy_remote.testing.control_loop import ControlLoop
from lerobot_policy_remote.testing.procs import policy_server

S = LinkState
MAX_AGE = 3.0  # the default: under load a 1 s bound leaves only part of each chunk executable
DEGRADED_AFTER = 0.5
BUFFER = 1.0


def first_state(
    e: RemoteInferenceEngine, since: float, states: tuple[LinkState, ...], timeout: float, replica: str = ""
) -> float:
    """Monotonic time of the first transition into one of `states` after `since` (optionally on `replica`)."""

    def hit() -> float | None:
        if replica and e.replica != replica:
            return None
        return next((t for t, st, _ in list(e.states.history) if t >= since and st in states), None)

    return wait_until(hit, timeout, interval=0.01, message=f"{[s.value for s in states]} after t={since:.2f}")


class Rig:
    def __init__(self, model: str, trials: int, server_retry_max_ms: int) -> None:
        self.model, self.trials, self.server_retry_max_ms = model, trials, server_retry_max_ms
        self.task = f"failover {uuid.uuid4().hex[:6]}"
        self.router = Router().start()
        self.servers: list[Proc] = [self.start_server()]
        self.robot = SimArm(SimArmConfig(cameras={"front": SimCameraConfig(height=48, width=64)}))
        self.robot.connect()
        hw = hw_to_dataset_features(self.robot.observation_features, "observation")
        cfg = RemoteInferenceConfig(
            connect_endpoint=self.router.endpoint,
            rtc=RTCConfig(enabled=False),
            max_action_age_s=MAX_AGE,
            degraded_after_s=DEGRADED_AFTER,
            buffer_time_s=BUFFER,
            request_timeout_s=3.0,
            reconnect_initial_backoff_s=0.5,
            reconnect_max_backoff_s=4.0,
            max_offline_s=600,
        )
        self.e = RemoteInferenceEngine(
            cfg,
            hw_features=hw,
            ordered_action_keys=list(self.robot.action_features),
            task=self.task,
            fps=30,
            model_id=model,
            shutdown_event=threading.Event(),
        )
        self.e.reset()
        self.e.start()
        self.e.resume()
        self.drv = ControlLoop(self.e, self.robot, max_action_age_s=MAX_AGE)
        self.streaming()

    def start_server(self) -> Proc:
        return policy_server(
            self.model,
            self.task,
            self.router.endpoint,
            "--zenoh.lease_ms=10000",
            f"--zenoh.retry_period_max_ms={self.server_retry_max_ms}",
            "--warmup_inferences=1",
            "--drain_timeout_s=5",
            max_seconds=3600,
        )

    def streaming(self, timeout: float = 60) -> None:
        wait_until(lambda: self.e.state is S.STREAMING, timeout, message="STREAMING")

    def back_after(self, t0: float) -> float:
        """STREAMING again: the first STREAMING after the first RECONNECTING after `t0`."""
        t_lost = first_state(self.e, t0, (S.RECONNECTING,), 60)
        return first_state(self.e, t_lost, (S.STREAMING,), 60)

    def kill9(self) -> dict[str, float]:
        self.streaming()
        old = self.e.replica
        t0 = time.monotonic()
        self.servers.pop(0).signal_program(signal.SIGKILL)
        left = first_state(self.e, t0, (S.DEGRADED, S.STALLED, S.RECONNECTING), 30) - t0
        self.servers.append(self.start_server())
        t_up = time.monotonic()  # "Policy server up" is printed right after the token is declared
        back = self.back_after(t0)
        assert self.e.replica != old
        return {"kill9: leave STREAMING (s)": left, "kill9: STREAMING after replacement up (s)": back - t_up}

    def sigstop(self) -> dict[str, float]:
        self.streaming()
        chunks = self.e.counters["chunks"]
        wait_until(lambda: self.e.counters["chunks"] >= chunks + 2, 60, message="two more chunks merged")
        server = self.servers[0]
        t0 = time.monotonic()
        server.signal_program(signal.SIGSTOP)
        try:
            t_deg = first_state(self.e, t0, (S.DEGRADED,), 30)
            t_stall = first_state(self.e, t0, (S.STALLED,), 30)
        finally:
            server.signal_program(signal.SIGCONT)
        self.streaming()
        return {"sigstop: DEGRADED after stop (s)": t_deg - t0, "sigstop: STALLED after DEGRADED (s)": t_stall - t_deg}

    def router_restart(self) -> dict[str, float]:
        self.streaming()
        t0 = time.monotonic()
        self.router.kill()
        first_state(self.e, t0, (S.RECONNECTING,), 30)
        self.router.start()
        t_listen = time.monotonic()
        back = self.back_after(t0)
        return {"router: STREAMING after router listens (s)": max(0.0, back - t_listen)}

    def drain(self) -> dict[str, float]:
        if len(self.servers) < 2:
            self.servers.append(self.start_server())
        self.streaming()
        serving = next(p for p in self.servers if self.e.replica in p.output())
        self.servers.remove(serving)
        spare = self.servers[0]
        t0 = time.monotonic()
        serving.signal_program(signal.SIGTERM)
        wait_until(
            lambda: self.e.state is S.STREAMING and self.e.replica in spare.output(),
            60,
            interval=0.01,
            message="streaming on the spare",
        )
        t_notice = first_state(self.e, t0, (S.RECONNECTING,), 60)  # the token went away or the draining event came
        back = first_state(self.e, t_notice, (S.STREAMING,), 60)
        serving.wait(60)
        return {
            "drain: STREAMING on the spare after SIGTERM (s)": back - t0,
            "drain: STREAMING on the spare after the robot got the notice (s)": back - t_notice,
        }

    def close(self) -> None:
        self.drv.stop()
        self.e.stop()
        for p in self.servers:
            p.stop()
        self.router.stop()
        self.robot.disconnect()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--model",
        required=True,
        help="a saved policy checkpoint (state + one 48x64 camera named front; chunk 50: longer than buffer_time_s)",
    )
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--faults", nargs="*", default=["sigstop", "router", "kill9", "drain"])
    ap.add_argument(
        "--server_retry_max_ms",
        type=int,
        default=1000,
        help="the servers' zenoh reconnect period cap (their default 1000): bounds the router-restart time",
    )
    a = ap.parse_args()
    rig = Rig(a.model, a.trials, a.server_retry_max_ms)
    results: dict[str, list[float]] = {}
    run = {"kill9": rig.kill9, "sigstop": rig.sigstop, "router": rig.router_restart, "drain": rig.drain}
    try:
        for fault in a.faults:
            for i in range(a.trials):
                for k, v in run[fault]().items():
                    results.setdefault(k, []).append(v)
                print(f"{fault} trial {i + 1}/{a.trials} done", flush=True)
    finally:
        rig.close()
    print("\n| measurement | trials | median (s) | max (s) |\n| --- | --- | --- | --- |")
    for k, vs in results.items():
        print(f"| {k} | {len(vs)} | {statistics.median(vs):.3f} | {max(vs):.3f} |")
    d = rig.drv
    print(
        f"\nexecuted actions: {len(d.executed)}; older than max_action_age_s: {d.stale}; NaN: {d.nan}; "
        f"from a foreign session: {d.foreign}"
    )


if __name__ == "__main__":
    main()
