"""Per-sample cost of the console's telemetry path after zenoh: decode, clean, store (one thread, no network).

    .venv/bin/python bench/console_ingest.py

2,000 robots' encoded telemetry samples, each applied 5 times per round through `Decoder.safe_apply`
(what the decoder thread runs per sample), 5 rounds; prints microseconds per sample per round and the median.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "console"))

from lerobot_fleet.data.sources.zenoh_source import ZenohSource  # noqa: E402
from lerobot_fleet.data.store import FleetStore  # noqa: E402

from lerobot_policy_remote.wire.codec import encode  # noqa: E402
from lerobot_policy_remote.wire.keys import ServiceKeys  # noqa: E402
from lerobot_policy_remote.wire.messages import RobotTelemetry  # noqa: E402
from lerobot_policy_remote.zenoh_config import ZenohSettings  # noqa: E402


def main() -> None:
    keys = ServiceKeys.for_service("org/model", "main", "pick")
    source = ZenohSource(ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:1"]))  # never started
    store = FleetStore()
    samples = []
    for i in range(2000):
        rid = f"robot-{i:04d}"
        t = RobotTelemetry(
            client_uuid=rid,
            state="STREAMING",
            model_id="org/model",
            service="pick",
            session_id="ab" * 16,
            replica="rep-0",
            episode_id=1,
            staleness_s=0.1,
            queue_s=0.5,
            rtt_p50_ms=12.0,
            rtt_p95_ms=20.0,
            last_outcome="ok",
            fps=30.0,
            seq=i,
        )
        samples.append((keys.robot(rid, "telemetry"), encode(t)))
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for key, payload in samples * 5:
            source.decoder.safe_apply(store, "telemetry", key, payload)
        rounds.append((time.perf_counter() - t0) / (len(samples) * 5) * 1e6)
    print("us per sample: " + " ".join(f"{r:.1f}" for r in rounds) + f"  median {statistics.median(rounds):.1f}")


if __name__ == "__main__":
    main()
