"""Smoke run of the side-by-side harness (bench/peers): a few requests per system so it cannot rot.

Runs the real command the docs cite, at its `--quick` size, and checks every arm answered every
request with the chunk for its own observation, and that the byte counts mean what the docs say.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from peers_runs import quick_run

ARMS = ["ours-jpeg", "ours-raw", "legacy-grpc", "openpi-ws", "openpi-ws-224", "gr00t-zmq"]
RAW_BYTES = 2 * 640 * 480 * 3


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_peers_quick_run(tmp_path: Path) -> None:
    args = ["--phases", "latency", "scaling", "--sleeps-ms", "20", "--n", "2", "--arms", *ARMS]
    res = quick_run(tmp_path, *args, "--legacy-procs-max", "0", bound_s=840)
    lat = {r["arm"]: r for r in res["latency"]}
    assert set(lat) == set(ARMS)
    for arm, r in lat.items():
        assert r["errors"] == 0, (arm, r["repeats"][0]["error_samples"])
        rep = r["repeats"][0]
        assert rep["requests"] == res["sizes"]["requests"] and rep["wrong_chunks"] == 0, (arm, rep)
        assert r["rtt_p50_ms"] >= 20.0, arm  # the injected S is inside every round trip
        assert r["server_cpu_ms"] >= 0 and r["client_cpu_ms"] > 0, arm
        # a 50x14 chunk came back: float32 for the peers, float16 for ours (negotiated within reply_max_error)
        assert r["down_bytes"] > 50 * 14 * (2 if arm.startswith("ours") else 4), arm
    for arm in ("ours-raw", "legacy-grpc", "openpi-ws", "gr00t-zmq"):  # raw frames: at least the pixels travel
        assert lat[arm]["up_bytes"] >= RAW_BYTES, (arm, lat[arm]["up_bytes"])
    assert lat["ours-jpeg"]["up_bytes"] < RAW_BYTES / 4  # JPEG mode really compresses
    assert 2 * 224 * 224 * 3 <= lat["openpi-ws-224"]["up_bytes"] < RAW_BYTES / 4  # openpi's robot-side resize_with_pad
    scale = {r["arm"]: r for r in res["scaling"] if r["mode"] == "one server"}
    for arm in ("ours-jpeg", "ours-raw", "openpi-ws", "gr00t-zmq"):
        assert (
            scale[arm]["opened"] == 2 and scale[arm]["wrong_chunks"] == 0 and min(scale[arm]["per_robot_req_s"]) > 0
        ), scale[arm]
    assert (tmp_path / "tables.md").read_text().count("| legacy-grpc |") >= 2
    assert (tmp_path / "peers-latency.png").stat().st_size > 10_000


def test_interleaved_repeats_rotate_the_arms() -> None:
    """Each repeat runs every arm once and a different arm first, so a slow window of the box is shared."""
    from bench.peers.run import interleaved

    order: list[str] = []
    reps = interleaved(["a", "b", "c"], 3, lambda arm: order.append(arm) or len(order))
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert reps == {"a": [1, 6, 8], "b": [2, 4, 9], "c": [3, 5, 7]}


def test_kill_row_is_the_median_of_interleaved_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill runs `kill_trials` times, the arms rotated as the latency repeats are; the row is the median of the
    times (a trial that never recovered counts as slowest) and the worst of the safety figures."""
    from bench.peers import faults as F

    again = {"a": [0.66, 0.43, 0.36], "b": [0.51, None, 0.54]}
    calls: list[tuple[str, str]] = []

    def fake_run(
        server: object, arm: str, system: str, extra: list[str], fault: str, log: object, window: float
    ) -> dict:
        calls.append((arm, fault))
        k = sum(1 for a, f in calls if a == arm and f == fault) - 1
        t = again[arm][k] if fault == "kill" else 2.1
        return {
            "arm": arm,
            "fault": fault,
            "noticed_s": 0.01 * (k + 1),
            "dry_s": 0.1 * k,
            "run_again_s": t,
            "server_back_s": 0.3,
            "stale_executed": k,
            "max_lag_s": 0.2 * k,
            "error_kinds": [f"E{k}"],
            "reconnects": 1 + k,
        }

    class FakeServer:
        def __init__(self, system: str, sleep_s: float, shm: bool = False) -> None:
            pass

        def stop(self) -> None:
            pass

    monkeypatch.setattr(F, "fault_run", fake_run)
    rows = F.faults(["a", "b"], {"a": ("ours", []), "b": ("gr00t", [])}, FakeServer, print, ("kill", "sigstop"), 4.0, 3)
    assert [c for c in calls if c[1] == "kill"] == [
        ("a", "kill"),
        ("b", "kill"),
        ("b", "kill"),
        ("a", "kill"),
        ("a", "kill"),
        ("b", "kill"),
    ]
    by = {(r["arm"], r["fault"]): r for r in rows}
    a, b = by["a", "kill"], by["b", "kill"]
    assert a["run_again_s"] == 0.43 and a["run_again_s_spread"] == [0.36, 0.66] and len(a["trials"]) == 3
    assert b["run_again_s"] == 0.54 and b["run_again_s_spread"] == [
        0.51,
        0.54,
    ]  # the trial that never recovered is slowest
    assert a["stale_executed"] == 0 + 1 + 2 and a["max_lag_s"] == 0.4 and a["error_kinds"] == ["E0", "E1", "E2"]
    assert by["a", "sigstop"]["run_again_s"] == 2.1 and "trials" not in by["a", "sigstop"]
    from bench.peers.report import faults_table

    assert "| 0.43 (0.36-0.66, 3 trials) |" in faults_table(rows)
