"""The console reads an audit publication as one or more lines: each line is one audit row, a malformed line or one
naming another replica costs only itself. Decoder and recorder directly, then a batch through the shared router."""

from __future__ import annotations

import threading

import pytest
from lerobot_fleet.data.metrics_fetch import MetricsTargets
from lerobot_fleet.data.sources.replay import Recorder, apply_event, load_events
from lerobot_fleet.data.sources.zenoh_decode import Decoder
from lerobot_fleet.data.sources.zenoh_source import ZenohSource
from lerobot_fleet.data.store import FleetStore

from lerobot_policy_remote.testing import wait_until
from lerobot_policy_remote.testing.fake_server import FakeServer
from lerobot_policy_remote.wire.codec import encode_json
from lerobot_policy_remote.wire.keys import ServiceKeys
from lerobot_policy_remote.wire.messages import AuditLine
from lerobot_policy_remote.zenoh_config import ZenohSettings

KEYS = ServiceKeys.for_service("org/batches", "main", "audit batches")
REPLICA = "gpu-b-0"
KEY = KEYS.server(REPLICA, "audit")


def _line(seq: int, replica: str = REPLICA, outcome: str = "ok") -> bytes:
    return encode_json(
        AuditLine("2026-01-01T00:00:00+00:00", "s-1", "r-1", seq, 0, 1.0, 20.0, [0, 50], 0, outcome, replica)
    )


def _decoder(recorder: Recorder | None = None) -> Decoder:
    return Decoder(MetricsTargets(), lambda: True, recorder)


def test_a_two_line_publication_gives_two_audit_rows():
    store = FleetStore()
    _decoder().safe_apply(store, "audit", KEY, _line(1) + b"\n" + _line(2))
    assert [a.seq_id for a in store.server_detail(REPLICA).audit] == [1, 2]


def test_a_malformed_or_foreign_line_does_not_lose_the_good_ones_of_its_publication():
    store = FleetStore()
    decoder = _decoder()
    payload = b"\n".join([_line(1), b'{"ts": broken', _line(2, replica="gpu-other"), b"[1,2]", _line(3)])
    decoder.safe_apply(store, "audit", KEY, payload)
    assert [a.seq_id for a in store.server_detail(REPLICA).audit] == [1, 3]
    notes = store.snapshot().notes
    bad = [n for n in notes if n.startswith(f"bad audit on {KEY}")]
    assert len(bad) == 1 and "1 more line" in bad[0], notes  # one note for the publication's two malformed lines
    assert any(n.startswith(f"dropped audit on {KEY}") and "gpu-other" in n for n in notes), notes
    assert decoder.mismatched == 1
    assert store.server_detail("gpu-other") is None  # the foreign line made no row for the replica it names


def test_a_recording_holds_one_event_per_line_and_replays_them(tmp_path):
    path = tmp_path / "rec.jsonl"
    recorder = Recorder(str(path))
    _decoder(recorder).safe_apply(FleetStore(), "audit", KEY, _line(1) + b"\nnot json\n" + _line(2))
    recorder.close()
    events = load_events(path)
    assert [(e["kind"], e["data"]["seq_id"]) for e in events] == [("audit", 1), ("audit", 2)]
    store = FleetStore()
    for ev in events:
        apply_event(store, ev)
    assert [a.seq_id for a in store.server_detail(REPLICA).audit] == [1, 2]


@pytest.mark.slow
def test_a_batch_through_the_router_reaches_the_store_line_by_line(router, zenoh_client):
    """The kit's replica publishes pairs of lines in one put (as a replica's batch) until the console has a pair."""
    server = FakeServer(zenoh_client(), KEYS, replica=REPLICA, serve_obs=False)
    server.add_session("r-1", "s-1")
    stop = threading.Event()

    def publish() -> None:
        seq = 0
        while not stop.wait(0.1):
            seq += 2
            server.publish_audit(
                *(AuditLine("t", "s-1", "r-1", n, 0, 1.0, 20.0, replica=REPLICA) for n in (seq, seq + 1))
            )

    t = threading.Thread(target=publish, daemon=True)
    t.start()
    store = FleetStore()
    source = ZenohSource(
        ZenohSettings(
            mode="client", connect_endpoints=[router.endpoint], connect_timeout_ms=1000, retry_period_max_ms=300
        ),
        status_period_s=0.5,
        scrape_period_s=0.5,
    )
    source.start(store)
    try:
        seqs = wait_until(
            lambda: (
                (d := store.server_detail(REPLICA))
                and (got := {a.seq_id for a in d.audit})
                and any(n % 2 == 0 and n + 1 in got for n in got)
                and got
            ),
            timeout=15,
            message="both lines of one publication",
        )
        assert all(n + 1 in seqs for n in seqs if n % 2 == 0 and n + 2 in seqs)  # no line of a batch went missing
    finally:
        stop.set()
        t.join(timeout=3)
        source.stop()
        server.close()
