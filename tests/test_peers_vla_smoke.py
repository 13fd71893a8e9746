"""The peers bench's pi0 phase (tiny pi0 with RTC on the CPU), smoke-sized, on real processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from peers_runs import quick_run


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_peers_vla_quick(tmp_path: Path) -> None:
    """The vla phase at its quickest: tiny pi0 on CPU behind ours (RTC, batching; and a robot asking for no RTC) and
    the openpi/GR00T-style servers (no RTC), N = 1 and 4; every request answered with a finite 50x14 chunk, ours' RTC
    requests carried prefixes, and the results name each arm's figures and ours / the best peer."""
    from bench.peers.run import VLA_ARMS

    res = quick_run(tmp_path, "--phases", "vla", bound_s=840)
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
