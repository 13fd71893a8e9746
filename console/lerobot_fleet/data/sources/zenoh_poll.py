"""The polls: each replica's status (with the routers and the servers they refuse) and its /metrics scrape."""

from __future__ import annotations

import threading
from typing import Any

from lerobot_policy_remote.wire.codec import to_dict

from ..metrics_fetch import MetricsTargets, Scraper
from ..ops import query_statuses
from ..sanitize import clean, clean_namespace
from ..store import FleetStore
from ..ui_gate import UiGate
from .refused import query_refused
from .replay import Recorder
from .routers import query_routers
from .zenoh_decode import Decoder


def poll_status(
    session: Any, store: FleetStore, decoder: Decoder, gate: UiGate, period_s: float, recorder: Recorder | None = None
) -> None:
    """One round: every replica's status, then the mesh's routers and the servers they refuse (both informative:
    a failure is a note and never stops the round)."""
    targets = decoder.targets
    try:
        statuses = query_statuses(session, timeout=min(2.0, period_s))
    except Exception as exc:
        store.note(f"status query failed: {exc}"[:200])
        return
    for status, ns in statuses:  # only replies whose key names the replica they claim (discovery.key_vouches_for)
        gate.wait()
        if recorder is not None:
            recorder.event({"kind": "status", "key": ns.keys.server(status.replica, "status"), "data": to_dict(status)})
        if not decoder.admit(store, "server", status.replica, ns):
            continue
        decoder.namespaces[("server", status.replica)] = ns
        status = clean(status)
        if status.metrics_url:
            refused = targets.offer(status.replica, status.metrics_url)
            if refused:
                store.on_metrics(status.replica, None, refused)
        store.on_status(status, clean_namespace(ns))
    try:
        store.set_routers(query_routers(session, timeout=min(1.0, period_s)))
    except Exception as exc:
        store.note(f"router list query failed: {exc}"[:200])
    try:
        refused_servers = query_refused(session, timeout=min(1.0, period_s))
        store.set_refused(r.intake() for r in refused_servers)
    except Exception as exc:
        store.note(f"refused-server query failed: {exc}"[:200])


def scrape_loop(
    store: FleetStore,
    targets: MetricsTargets,
    gate: UiGate,
    period_s: float,
    stop: threading.Event,
    recorder: Recorder | None = None,
) -> None:
    """Start a round of scrapes each period; each replica's fetch is bounded and runs on its own pool thread."""

    def report(replica: str, values: dict[str, float] | None, error: str) -> None:
        gate.wait()
        if recorder is not None and values is not None:
            recorder.event({"kind": "metrics", "replica": replica, "data": values})
        store.on_metrics(replica, values, clean(error))

    scraper = Scraper(targets, report)
    try:
        while not stop.wait(period_s):
            scraper.round()
    finally:
        scraper.close()
