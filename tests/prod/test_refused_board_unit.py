"""The board of refused servers: only a server's own announcements count, memory and lines stay bounded, hostile
replies are dropped, entries expire (pure; tests/prod/test_refused_board.py runs it through a real router)."""

from __future__ import annotations

import json

from lerobot_fleet.router.acl_log import RefusalLog
from lerobot_fleet.router.refused_board import (
    BOARD_MAX_BYTES,
    MAX_FIELD,
    MAX_KEY,
    MAX_REFUSED,
    REFUSED_TTL_S,
    RefusedServers,
    board_line,
    parse_board,
)
from lerobot_fleet.router.router import RefusedBoard

PFX = "\x1b[35mTRACE\x1b[0m rx-1 zenoh::net::routing::interceptor::access_control: "
SUBJ = "{z} on Interface(lo)+CertCommonName({cn})+Transport(Tls)+{z}"
Z = "6364948186aa1834b7ca8b654728c564"
STATUS = "@lerobot/m/main/pick/server/rogue/status"


def board_entry(count: float, age_s: float, for_s: float) -> dict:
    """A well-formed entry of a router's board, for the refused server `rogue`."""
    return {
        "cn": "rogue",
        "replica": "rogue",
        "model": "m",
        "revision": "main",
        "service": "pick",
        "what": "reply",
        "key": STATUS,
        "count": count,
        "age_s": age_s,
        "for_s": for_s,
    }


def test_a_refused_server_announcement_is_on_the_board_printed_or_not():
    t = [0.0]
    log = RefusalLog(window_s=10, clock=lambda: t[0])
    refused = PFX + SUBJ.format(z=Z, cn="rogue") + f" is unauthorized to Declare Queryable (ingress) on {STATUS}\n"
    assert log.feed(refused) is not None
    t[0] = 2.0
    assert log.feed(refused) is None  # within the print window: not printed, still counted
    [entry] = log.servers.board()
    assert (entry["cn"], entry["replica"], entry["service"], entry["what"], entry["count"]) == (
        "rogue",
        "rogue",
        "pick",
        "declare_queryable",
        2,
    )
    assert (entry["age_s"], entry["for_s"]) == (0.0, 2.0)
    # a robot refused on a robot key, or a server's query, is not a server announcing itself
    log.feed(
        PFX
        + SUBJ.format(z="ab" + Z[2:], cn="arm-a")
        + " is unauthorized to Put (ingress) on @lerobot/m/main/pick/robot/x/telemetry\n"
    )
    log.feed(
        PFX
        + SUBJ.format(z=Z, cn="rogue")
        + " is unauthorized to Query (ingress) on @lerobot/m/main/pick/server/*/status\n"
    )
    assert len(log.servers.board()) == 1
    t[0] = 2.0 + REFUSED_TTL_S + 1
    assert log.servers.board() == []  # it stopped trying (exited, or was fixed)


def test_memory_and_the_line_stay_bounded_whatever_the_clients_name():
    board = RefusedServers(clock=lambda: 0.0)
    for i in range(MAX_REFUSED * 4):
        assert board.observe(
            "x" * 500 + str(i), "liveliness_token", "ingress", f"@lerobot/m/main/{'s' * 200}/server/r{i}/alive"
        )
    entries = board.board()
    assert len(entries) == MAX_REFUSED and entries[0]["replica"] == f"r{MAX_REFUSED * 4 - 1}"  # newest first
    assert all(len(e["cn"]) <= MAX_FIELD and len(e["key"]) <= MAX_KEY for e in entries)
    line = board_line(entries)
    assert len(line) <= BOARD_MAX_BYTES and 0 < len(json.loads(line)["servers"]) < MAX_REFUSED
    assert not board.observe("rogue", "declare_queryable", "egress", STATUS)
    assert not board.observe("rogue", "declare_queryable", "ingress", "@lerobot/not a key")


def test_hostile_replies_are_dropped_field_by_field():
    good = board_entry(count=3, age_s=1.5, for_s=9)
    bad = [{**good, "count": "3"}, {**good, "cn": 7}, {**good, "age_s": True}, "text", None]
    out = parse_board(json.dumps({"servers": [*bad, good, {**good, "cn": "\x1b[31mred"}]}))
    assert [e["cn"] for e in out] == ["rogue", "?[31mred"]  # made printable
    for raw in (b"", b"\xff", b"[]", b'{"servers": 5}', json.dumps({"servers": [good] * 1000})):
        assert len(parse_board(raw)) <= MAX_REFUSED


def test_the_router_ages_its_last_board_and_drops_what_expired():
    t = [100.0]
    board = RefusedBoard(-1, clock=lambda: t[0])
    entry = board_entry(count=1.0, age_s=5.0, for_s=5.0)
    board.take([entry])
    t[0] += 10
    assert json.loads(board.payload())["servers"][0]["age_s"] == 15.0
    t[0] += REFUSED_TTL_S
    assert json.loads(board.payload())["servers"] == []
