"""lerobot 0.6.1 async_inference arm: its real gRPC PolicyServer and RobotClient, pickle on the wire.

Server: `lerobot.async_inference.policy_server.PolicyServer` served exactly as its `serve()` does
(gRPC, ThreadPoolExecutor(max_workers=4), insecure port), `inference_latency=0` (its built-in 1/30 s
floor would otherwise hide everything). The stub replaces only `_predict_action_chunk` (sleep S,
then the fixed chunk as TimedActions), as lerobot's own e2e test stubs the policy, and
`SendPolicyInstructions` skips `from_pretrained` for the stub. With `--act` the real load path runs.
Client: the real `RobotClient` (Ready, SendPolicyInstructions, pickled TimedObservation in 2 MiB
chunks, the GetActions receiver thread), on a lerobot Robot whose observation the bench sets.
"""

from __future__ import annotations

import pickle  # noqa: S403 - the legacy protocol is pickle; this arm measures it as shipped
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .workload import ACTION_NAMES, CHUNK, Images, stub_chunk

TIMESTEP_STRIDE = 1000  # a chunk covers timesteps [t, t+50): requests never overlap
ROBOT_STRIDE = 100_000  # timestep // (ROBOT_STRIDE * TIMESTEP_STRIDE) names the robot


def serve(host: str, port: int, sleep_s: float, ready: Callable[[], None], act_path: str = "") -> None:
    from concurrent import futures

    import grpc
    import torch
    from lerobot.async_inference.configs import PolicyServerConfig
    from lerobot.async_inference.policy_server import PolicyServer
    from lerobot.transport import services_pb2, services_pb2_grpc

    ps = PolicyServer(PolicyServerConfig(host=host, port=port, inference_latency=0.0))
    if not act_path:

        def instructions(request: Any, context: Any) -> Any:
            specs = pickle.loads(request.data)  # noqa: S301 - what the real server does
            ps.lerobot_features, ps.actions_per_chunk, ps.policy_type = (
                specs.lerobot_features,
                specs.actions_per_chunk,
                "stub",
            )
            return services_pb2.Empty()

        def predict(obs: Any) -> list[Any]:  # lerobot's TimedObservation -> its TimedActions
            time.sleep(sleep_s)
            base = np.array([obs.get_observation()[k] for k in ACTION_NAMES], np.float32)
            ps.last_processed_obs = obs
            timed: list[Any] = ps._time_action_chunk(
                obs.get_timestamp(), list(torch.from_numpy(stub_chunk(base))), obs.get_timestep()
            )
            return timed

        ps.SendPolicyInstructions = instructions
        ps._predict_action_chunk = predict
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    services_pb2_grpc.add_AsyncInferenceServicer_to_server(ps, server)
    server.add_insecure_port(f"{host}:{port}")
    server.start()
    ready()
    server.wait_for_termination()


def _client_class() -> type:
    from lerobot.async_inference.robot_client import RobotClient

    class NotifyingClient(RobotClient):
        """The real client; only adds an event when its receiver thread has merged a chunk."""

        def __init__(self, *a: Any, robot_id: int = 0, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.arrived = threading.Condition()
            self.robot_id, self.cross = robot_id, 0

        def _aggregate_action_queues(self, incoming: list[Any], aggregate_fn: Any = None) -> None:
            if incoming and incoming[0].get_timestep() // (ROBOT_STRIDE * TIMESTEP_STRIDE) != self.robot_id:
                self.cross += 1  # this robot's receiver got the chunk computed for another robot's observation
            super()._aggregate_action_queues(incoming, aggregate_fn)
            with self.arrived:
                self.arrived.notify_all()

    return NotifyingClient


class Client:
    """One robot driving the real RobotClient: send a must-go observation, wait for its chunk."""

    def __init__(self, host: str, port: int, robot: int = 0, act_path: str = "", timeout_s: float = 30.0) -> None:
        from lerobot.async_inference.configs import RobotClientConfig

        from .config_peers_arm import PeersArmConfig

        cfg = RobotClientConfig(
            policy_type="act",
            pretrained_name_or_path=act_path or "stub",
            robot=PeersArmConfig(),
            actions_per_chunk=CHUNK[0],
            server_address=f"{host}:{port}",
        )
        self.rc = _client_class()(cfg, robot_id=robot)
        if not self.rc.start():
            raise ConnectionError(f"legacy policy server at {host}:{port} did not accept the client")
        self.robot, self.timeout_s, self.step = robot, timeout_s, 0
        self.thread = threading.Thread(target=self.rc.receive_actions, daemon=True)
        self.thread.start()
        self.rc.start_barrier.wait()

    def infer(self, images: Images, state: NDArray[np.float32]) -> NDArray[np.float32]:
        from lerobot.async_inference.helpers import TimedObservation

        self.step += 1
        ts = (self.robot * ROBOT_STRIDE + self.step) * TIMESTEP_STRIDE
        self.rc.robot.set_observation(images, state)
        raw = self.rc.robot.get_observation()
        raw["task"] = ""
        obs = TimedObservation(timestamp=time.time(), observation=raw, timestep=ts, must_go=True)
        deadline = time.monotonic() + self.timeout_s
        with self.rc.arrived:
            if not self.rc.send_observation(obs):
                raise ConnectionError("legacy send_observation failed")
            while True:
                with self.rc.action_queue_lock:
                    got = list(self.rc.action_queue.queue)
                mine = [a for a in got if a.get_timestep() // TIMESTEP_STRIDE == ts // TIMESTEP_STRIDE]
                if mine:
                    with self.rc.action_queue_lock:
                        self.rc.action_queue.queue.clear()
                    return np.stack([a.get_action().numpy() for a in mine])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no chunk for timestep {ts} within {self.timeout_s}s")
                self.rc.arrived.wait(left)

    @property
    def cross(self) -> int:
        cross: int = self.rc.cross  # the client is a subclass of lerobot's (untyped) RobotClient
        return cross

    def close(self) -> None:
        self.rc.shutdown_event.set()
        self.rc.channel.close()
