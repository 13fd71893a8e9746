"""The peers bench's fault, link and tail phases, smoke-sized: each runs to its end on real processes.
(A file of its own so that two workers run the peers' smoke runs side by side.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from peers_runs import quick_run, run_bench


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_peers_faults_and_link_quick(tmp_path: Path) -> None:
    """The fault and constrained-link phases on one system (they are system-agnostic code)."""
    res = quick_run(tmp_path, "--phases", "faults", "link", "--arms", "gr00t-zmq", bound_s=540)
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
    res = quick_run(
        tmp_path,
        "--phases",
        "faults",
        "--faults",
        "kill",
        "--kill-window",
        "10",
        "--arms",
        "ours-jpeg",
        "--no-report",
        bound_s=100,
    )
    kill = {r["fault"]: r for r in res["faults"]}["kill"]
    assert kill["noticed_s"] is not None and kill["noticed_s"] < 1.0, (
        kill
    )  # the server's token went away: noticed at once
    assert kill["run_again_s"] is not None and kill["reconnects"] >= 1, kill
    assert kill["stale_executed"] == 0, (
        kill
    )  # never an action from a chunk that arrived more than 1 s after its observation


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tail_run_records_every_round_trip(tmp_path: Path) -> None:
    """`bench.peers.tail` (the S = 20 tail over many requests per arm): every request of every repeat is kept,
    with S taken off, and the summary names each arm."""
    out = tmp_path / "tail.json"
    stdout = run_bench(
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
        bound_s=240,
    )
    runs = json.loads(out.read_text())
    assert set(runs) == {"ours-samehost", "gr00t-zmq"}
    for arm, seqs in runs.items():
        assert [len(s) for s in seqs] == [4, 4], arm
        starts = [t for s in seqs for t, _ in s]
        assert starts == sorted(starts), arm  # the repeats ran one after the other, each in order
        assert all(-1e-3 < over < 1.0 for s in seqs for _, over in s), (arm, seqs)  # S (20 ms) is taken off
        assert f"{arm:14s} median of repeats" in stdout
