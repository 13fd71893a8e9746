"""Smoke run of the side-by-side harness (bench/peers): a few requests per system so it cannot rot.

Runs the real command the docs cite, at its `--quick` size, and checks every arm answered every
request with the chunk for its own observation, and that the byte counts mean what the docs say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARMS = ["ours-jpeg", "ours-raw", "legacy-grpc", "openpi-ws", "openpi-ws-224", "gr00t-zmq"]
RAW_BYTES = 2 * 640 * 480 * 3


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_peers_quick_run(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "bench.peers.run",
        "--quick",
        "--phases",
        "latency",
        "scaling",
        "--out",
        str(tmp_path),
        "--sleeps-ms",
        "20",
        "--n",
        "2",
        "--arms",
        *ARMS,
        "--legacy-procs-max",
        "0",
    ]
    proc = subprocess.run(["timeout", "-s", "KILL", "840", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=870)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
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


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_peers_faults_and_link_quick(tmp_path: Path) -> None:
    """The fault and constrained-link phases on one system (they are system-agnostic code)."""
    cmd = [
        sys.executable,
        "-m",
        "bench.peers.run",
        "--quick",
        "--phases",
        "faults",
        "link",
        "--arms",
        "gr00t-zmq",
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.run(["timeout", "-s", "KILL", "540", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=570)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    faults = {r["fault"]: r for r in res["faults"]}
    assert set(faults) == {"kill", "sigstop", "partition"}
    assert (
        faults["kill"]["server_back_s"] is not None
    )  # restarted (GR00T's REQ may stay wedged: that is measured, not asserted)
    for r in (faults["sigstop"], faults["partition"]):  # the robot ran again, on fresh observations
        assert r["run_again_s"] is not None, r
    assert faults["sigstop"]["run_again_s"] >= 2.0 - 0.1  # nothing fresh can come from a paused server
    link = {r["link"]: r for r in res["link"]}
    assert set(link) == {"1gbit-0.5ms", "100mbit-20ms", "20mbit-40ms"}
    # 1.84 MB of raw frames per request: bandwidth alone costs >= 14.7 ms at 1 Gbit/s, 147 at 100 Mbit/s, 737 at
    # 20 Mbit/s
    assert link["1gbit-0.5ms"]["rtt_p50_ms"] >= 14.7 + 0.5
    assert link["100mbit-20ms"]["rtt_p50_ms"] >= 147 + 20
    assert link["20mbit-40ms"]["rtt_p50_ms"] >= 737 + 40
    assert "| gr00t-zmq | 20mbit-40ms |" in (tmp_path / "tables.md").read_text()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_peers_kill_drives_our_real_engine(tmp_path: Path) -> None:
    """Ours' fault run drives the product's engine (its worker, the server token's liveliness), not a bench loop."""
    cmd = [
        sys.executable,
        "-m",
        "bench.peers.run",
        "--quick",
        "--phases",
        "faults",
        "--faults",
        "kill",
        "--kill-window",
        "10",
        "--arms",
        "ours-jpeg",
        "--out",
        str(tmp_path),
        "--no-report",
    ]
    proc = subprocess.run(["timeout", "-s", "KILL", "100", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    kill = {r["fault"]: r for r in json.loads((tmp_path / "results.json").read_text())["faults"]}["kill"]
    assert kill["noticed_s"] is not None and kill["noticed_s"] < 1.0, (
        kill
    )  # the server's token went away: noticed at once
    assert kill["run_again_s"] is not None and kill["reconnects"] >= 1, kill
    assert kill["stale_executed"] == 0, (
        kill
    )  # never an action from a chunk that arrived more than 1 s after its observation


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_peers_vla_quick(tmp_path: Path) -> None:
    """The vla phase at its quickest: tiny pi0 on CPU behind ours (RTC, batching; and a robot asking for no RTC) and
    the openpi/GR00T-style servers (no RTC), N = 1 and 4; every request answered with a finite 50x14 chunk, ours' RTC
    requests carried prefixes, and the results name each arm's figures and ours / the best peer."""
    from bench.peers.run import VLA_ARMS

    cmd = [sys.executable, "-m", "bench.peers.run", "--quick", "--phases", "vla", "--out", str(tmp_path)]
    proc = subprocess.run(["timeout", "-s", "KILL", "840", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=870)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())
    per_robot = res["sizes"]["vla_requests"]
    rows = {(r["arm"], r["n"]): r for r in res["vla"]}
    assert set(rows) == {(arm, n) for arm in VLA_ARMS for n in (1, 4)}
    for (arm, n), r in rows.items():
        assert r["errors"] == 0 and r["wrong_chunks"] == 0, (arm, n, r["repeats"][0]["error_samples"])
        assert (r["size"], r["device"]) == ("tiny", "cpu") and r["parameters"] < 5e6, r
        rep = r["repeats"][0]
        assert rep["opened"] == n and rep["requests"] == n * per_robot, (arm, n, rep)
        assert 0 < r["rtt_p50_ms"] <= r["rtt_p99_ms"] and r["chunks_s"] == r["req_per_s"] > 0, (arm, n)
        if arm == "ours-nortc":  # the same server; this robot asks for no RTC, so no request carries a prefix
            assert r["rtc"] == "off" and r["rtc_prefixed"] == 0, r
        if arm.startswith("ours") and arm != "ours-nortc":  # RTC: every request after its first carried its prefix
            assert r["rtc"] == "prefix per robot" and r["rtc_prefixed"] >= n * per_robot, r
        if arm.startswith("ours"):  # batching on, compared with the best peer
            assert r["server_max_batch"] == 8 and r["server_batch_mean"] >= 1.0, r
            v = r["vs_best_peer"]
            assert {v["rtt_p50_peer"], v["rtt_p99_peer"], v["chunks_s_peer"]} <= {"openpi-ws", "gr00t-zmq"}, v
            assert all(v[k] > 0 for k in ("rtt_p50", "rtt_p99", "chunks_s")), v
        else:  # the peers' protocols carry no prefix: they serve plain chunks
            assert r["rtc"].startswith("none") and r["rtc_prefixed"] == 0 and "vs_best_peer" not in r, r
    tables = (tmp_path / "tables.md").read_text()
    assert (
        "### pi0 (vla)" in tables
        and "| ours-jpeg | 4 | prefix per robot |" in tables
        and "| gr00t-zmq | 4 | none" in tables
    )


def test_interleaved_repeats_rotate_the_arms() -> None:
    """Each repeat runs every arm once and a different arm first, so a slow window of the box is shared."""
    from bench.peers.run import interleaved

    order: list[str] = []
    reps = interleaved(["a", "b", "c"], 3, lambda arm: order.append(arm) or len(order))
    assert order == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert reps == {"a": [1, 6, 8], "b": [2, 4, 9], "c": [3, 5, 7]}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tail_run_records_every_round_trip(tmp_path: Path) -> None:
    """`bench.peers.tail` (the S = 20 tail over many requests per arm): every request of every repeat is kept,
    with S taken off, and the summary names each arm."""
    out = tmp_path / "tail.json"
    cmd = [
        sys.executable,
        "-m",
        "bench.peers.tail",
        "--arms",
        "ours-samehost",
        "gr00t-zmq",
        "--requests",
        "4",
        "--repeats",
        "2",
        "--sleep-ms",
        "20",
        "--out",
        str(out),
    ]
    proc = subprocess.run(["timeout", "-s", "KILL", "240", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=270)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    runs = json.loads(out.read_text())
    assert set(runs) == {"ours-samehost", "gr00t-zmq"}
    for arm, seqs in runs.items():
        assert [len(s) for s in seqs] == [4, 4], arm
        starts = [t for s in seqs for t, _ in s]
        assert starts == sorted(starts), arm  # the repeats ran one after the other, each in order
        assert all(-1e-3 < over < 1.0 for s in seqs for _, over in s), (arm, seqs)  # S (20 ms) is taken off
        assert f"{arm:14s} median of repeats" in proc.stdout


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
