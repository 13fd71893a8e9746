"""What one simulated run is asked to do: the fleet's size, its timing, the processes' priorities, its rollout."""

from __future__ import annotations

from dataclasses import dataclass

# The two models of a scripted rollout: the fleet starts on the old one (its replicas and every robot), the new one's
# replicas wait beside it. Each is a namespace's revision and the fingerprint its replicas claim.
OLD_REVISION, OLD_FINGERPRINT = "v1", "a1" * 32
NEW_REVISION, NEW_FINGERPRINT = "v2", "b2" * 32


@dataclass
class SimArgs:
    robots: int = 20
    replicas: int = 2
    routers: int = 2
    seconds: float = 15.0
    per_host: int = 250  # robots per host process
    drain_at: float = -1.0  # seconds into the run; < 0: no drain
    console: bool = False
    workdir: str | None = None
    max_batch: int = 32
    infer_ms: float = 10.0
    telemetry_period_s: float = 1.0
    telemetry_max_period_s: float = 1.0
    # The fleet (routers, replicas, robot hosts) runs at this nice level, the console (this process) at its own: on
    # one box the simulated fleet stands for many machines, and the console can be measured as on an operator's
    # machine (it needs 15 % of a core; behind a dozen busy processes its 1 Hz refresh waited for a CPU). All fleet
    # processes share the one level, so among themselves nothing changes. 0 (default): all at the same priority.
    fleet_nice: int = 0
    # The routers' nice level (None: `fleet_nice`). They stand for the network between the machines: at the robots'
    # level, a drain's burst of robot-host and replica work delayed every hop through them (moves up to 2.5 s; at 0:
    # 1.3-1.7 s, docs/decisions.md).
    router_nice: int | None = None
    # A rollout to the new model S seconds into the run (< 0: none, and the fleet runs the stub's default model):
    # `start --to v2 --canary C [--step N]`, then `promote` once the canary settled.
    rollout_at: float = -1.0
    new_replicas: int = 0  # replicas of the new model (started only with a rollout)
    rollout_canary: float = 0.1
    rollout_step: int = 0  # robots per promote step; 0: the router's default (the canary's count)

    @property
    def rollout(self) -> bool:
        return self.rollout_at >= 0
