"""A server the router refuses is a row of the servers table: its CN and namespace, its figures unknown (never zeros).

Through the store and the derivation with a frozen clock; the live board is tested in tests/prod/test_refused_board.py.
"""

from __future__ import annotations

from fleet_helpers import make_app, sync, until
from lerobot_fleet.console.render import server_cells
from lerobot_fleet.console.render.detail import server_summary_text
from lerobot_fleet.console.widgets import KeyedTable
from lerobot_fleet.data.derive_servers import waiting_reason
from lerobot_fleet.data.sources.fake import ManualClock
from lerobot_fleet.data.sources.refused import RefusedServer
from lerobot_fleet.data.store import RECONNECT_GRACE_S, FleetStore
from lerobot_fleet.verbs.commands import snapshot_json, snapshot_text

from lerobot_policy_remote.wire.keys import Namespace
from lerobot_policy_remote.wire.messages import ModelInfo, ServerStatus

NS = Namespace("org/act", "main", "pick")
REFUSED = RefusedServer("a1b2c3d4e5f6", "srv-b", "gpu-7", "org/act", "main", "pick", "declare_queryable", "k", 3.0, 4.0)


def connected_store() -> tuple[FleetStore, ManualClock]:
    clock = ManualClock()
    store = FleetStore(clock=clock)
    store.set_connection("connected")
    return store, clock


def test_a_refused_server_is_a_row_with_its_cn_and_no_figures() -> None:
    store, clock = connected_store()
    store.set_refused([REFUSED.intake()])
    clock.advance(2.0)
    snap = store.snapshot()
    row = snap.server("gpu-7")
    assert row is not None and row.health == "refused" and row.cn == "srv-b"
    assert (row.model_id, row.revision, row.service, row.ns) == ("org/act", "main", "pick", NS)
    assert (row.requests_per_s, row.n_max, row.headroom, row.errors, row.superseded) == (None,) * 5
    assert row.seen_age_s == 6.0  # refused 4 s before the board was read, read 2 s ago
    assert any("lerobot-fleet pki issue" in n for n in snap.notes)  # the fix stays a note while it lasts
    cells = [text for text, _ in server_cells(row)]
    assert cells[1] == "gpu-7 CN=srv-b" and cells[10] == "refused 6s"
    assert cells[5:10] + cells[11:] == ["—"] * 7  # sessions, load, req/s, err, sup, N_max, room: unknown
    line = next(ln for ln in snapshot_text(snap).splitlines() if "gpu-7" in ln)
    assert "refused" in line and "CN=srv-b" in line and "0/0" not in line and "0.00" not in line
    assert snapshot_json(snap)["servers"][0]["health"] == "refused"
    detail = store.server_detail("gpu-7")
    assert detail is not None and "lerobot-fleet pki issue" in detail.notes[0]
    assert "CN=srv-b" in server_summary_text(detail).plain


def test_the_refused_row_goes_when_the_routers_stop_naming_it_and_warns_once() -> None:
    store, _ = connected_store()
    store.set_refused([REFUSED.intake()])
    store.set_refused([REFUSED.intake()])
    assert [e.text for e in store.events()].count(REFUSED.notice()) == 1
    store.set_refused([])
    snap = store.snapshot()
    assert snap.server("gpu-7") is None and not snap.notes
    assert store.server_detail("gpu-7") is None


def test_a_fresh_status_wins_and_a_gone_row_is_replaced() -> None:
    store, clock = connected_store()
    model = ModelInfo(repo_or_path="org/act", revision="main")
    status = ServerStatus(replica="gpu-7", model=model, service="pick", max_sessions=4, warmed_up=True)
    store.on_server_alive("gpu-7", True, NS)
    store.on_status(status, NS)
    store.set_refused([REFUSED.intake()])
    assert store.snapshot().server("gpu-7").health == "ok"  # its own word reached the console: not refused now
    clock.advance(RECONNECT_GRACE_S + 1)  # the console's link has been up long enough for a lost token to mean gone
    store.on_server_alive("gpu-7", False, NS)  # it restarted under a certificate the router refuses
    snap = store.snapshot()
    assert [s.health for s in snap.servers] == ["refused"]
    assert store.server_detail("gpu-7").row.health == "refused"


def test_a_robot_waiting_for_a_refused_server_is_told_so() -> None:
    store, _ = connected_store()
    store.set_refused([REFUSED.intake()])
    why = waiting_reason(NS, store.snapshot().servers)
    assert why == "waiting: no replica serves this model/service (gpu-7 refused)"


@sync
async def test_the_servers_table_shows_the_refused_row_with_its_cn() -> None:
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        app.store.set_refused([REFUSED.intake()])
        servers = app.screen.query_one("#servers", KeyedTable)
        await until(pilot, lambda: "gpu-7" in servers.row_keys(), 5, "the refused server's row", tick=True)
        assert servers.get_column_text("gpu-7", "replica") == "gpu-7 CN=srv-b"
        assert servers.get_column_text("gpu-7", "health").startswith("refused")
        unknown = [servers.get_column_text("gpu-7", c) for c in ("sessions", "load", "rps", "nmax", "headroom")]
        assert unknown == ["—"] * 5
