"""The router's refusal log keeps real refusals, drops zenoh's bookkeeping, and cannot be flooded."""

from __future__ import annotations

from lerobot_fleet.router.acl_log import RefusalLog

PFX = (
    "\x1b[2m2026-11-23T09:08:00Z\x1b[0m \x1b[35mTRACE\x1b[0m rx-1 ThreadId(10) "
    "\x1b[2mzenoh::net::routing::interceptor::access_control\x1b[0m: "
)
SUBJ = "{z} on Interface(lo)+CertCommonName({cn})+Transport(Tls)+{z}"
Z = "6364948186aa1834b7ca8b654728c564"


def line(text: str) -> str:
    return PFX + text + "\n"


def test_refusals_pass_allowed_and_bookkeeping_do_not():
    t = [0.0]
    log = RefusalLog(window_s=10, clock=lambda: t[0])
    assert log.feed("Zenoh router up: listening on tls/x\n") == "Zenoh router up: listening on tls/x"
    assert (
        log.feed(
            line(SUBJ.format(z=Z, cn="arm-a") + " is authorized to Put (ingress) on @lerobot/m/r/s/server/r1/obs/arm-a")
        )
        is None
    )
    # zenoh pre-computes every message kind for a newly declared key: not a refusal
    assert log.feed(line("ACL (ingress): caching permissions for `@lerobot/m/r/s/server/r1/drain` ...")) is None
    assert (
        log.feed(
            line(SUBJ.format(z=Z, cn="rep-1") + " is unauthorized to Put (ingress) on @lerobot/m/r/s/server/r1/drain")
        )
        is None
    )
    assert (
        log.feed(
            line(
                SUBJ.format(z=Z, cn="rep-1")
                + " is unauthorized to Declare/Undeclare Subscriber (ingress) on @lerobot/m/r/s/server/r1/drain"
            )
        )
        is None
    )
    out = log.feed(
        line(
            SUBJ.format(z="ab" + Z[2:], cn="arm-a")
            + " is unauthorized to Query (ingress) on @lerobot/m/r/s/server/r1/drain"
        )
    )
    assert out == "ACL refused: CN=arm-a query (ingress) on @lerobot/m/r/s/server/r1/drain"
    cached = log.feed(
        line(
            f"Using cached result: {Z} is unauthorized to Declare Liveliness Subscriber (ingress) "
            "on @lerobot/x/y/z/robot/b/alive"
        )
    )
    # zenoh's cached verdict names only the zid; the log names the certificate it learnt for that zid
    assert cached == "ACL refused: CN=rep-1 declare_liveliness_subscriber (ingress) on @lerobot/x/y/z/robot/b/alive"
    unseen = "ef" + Z[2:]
    assert (
        log.feed(
            line(f"Using cached result: {unseen} is unauthorized to Put (ingress) on @lerobot/x/y/z/robot/b/alive")
        )
        == f"ACL refused: zid={unseen} (certificate not seen yet) put (ingress) on @lerobot/x/y/z/robot/b/alive"
    )


def test_cached_refusals_name_the_cn_learnt_from_an_allowed_line_even_in_the_filter_process():
    """The filter's fast path drops allowed lines, but still learns zid -> CN from them."""
    import subprocess
    import sys

    lines = [
        line(
            SUBJ.format(z=Z, cn="arm-01") + " is authorized to Put (ingress) on @lerobot/m/r/s/robot/arm-01/telemetry"
        ),
        line(f"Using cached result: {Z} is unauthorized to Put (ingress) on @lerobot/m/r/s/server/rep-1/obs/arm-02"),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "lerobot_fleet.router.acl_log", "10"],
        input="".join(lines).encode(),
        capture_output=True,
        timeout=60,
    )
    assert res.stdout.decode().splitlines() == [
        "ACL refused: CN=arm-01 put (ingress) on @lerobot/m/r/s/server/rep-1/obs/arm-02"
    ]


def test_a_flood_of_refusals_is_rate_limited_with_a_count():
    t = [0.0]
    log = RefusalLog(window_s=10, clock=lambda: t[0])
    refused = line(
        SUBJ.format(z=Z, cn="arm-a") + " is unauthorized to Put (ingress) on @lerobot/m/r/s/server/r1/obs/arm-b"
    )
    outs = []
    for i in range(1000):
        t[0] = i * 0.02  # 1000 puts in 20 s
        outs.append(log.feed(refused))
    printed = [o for o in outs if o]
    assert len(printed) == 2
    assert "more time(s)" in printed[1] and "(and 499 more" in printed[1]


def test_the_filter_process_end_to_end():
    """`python -m lerobot_fleet.router.acl_log` is what the router pipes zenoh's stdout through."""
    import subprocess
    import sys

    other = "cd" + Z[2:]
    lines = [
        "Zenoh router up: listening on tls/x\n",
        line(SUBJ.format(z=Z, cn="arm-a") + " is authorized to Put (ingress) on @lerobot/m/r/s/server/r1/obs/arm-a"),
        line("ACL (ingress): caching permissions for `@lerobot/m/r/s/server/r1/drain` ..."),
        line(SUBJ.format(z=Z, cn="rep-1") + " is authorized to Query (ingress) on @lerobot/m/r/s/server/r1/drain"),
        line(SUBJ.format(z=Z, cn="rep-1") + " is unauthorized to Put (ingress) on @lerobot/m/r/s/server/r1/drain"),
        line(
            SUBJ.format(z=other, cn="arm-b") + " is unauthorized to Query (ingress) on @lerobot/m/r/s/server/r1/drain"
        ),
    ]
    res = subprocess.run(
        [sys.executable, "-m", "lerobot_fleet.router.acl_log", "10"],
        input="".join(lines).encode(),
        capture_output=True,
        timeout=60,
    )
    assert res.returncode == 0
    assert res.stdout.decode().splitlines() == [
        "Zenoh router up: listening on tls/x",
        "ACL refused: CN=arm-b query (ingress) on @lerobot/m/r/s/server/r1/drain",
    ]


def test_a_certificate_missing_from_the_inventory_is_named_from_the_tls_accept_lines():
    """Zenoh names an unknown client only by zid; the TLS accept lines tie that zid to the CN (lines from a real
    router)."""
    dbg = "\x1b[2m2026-11-23T17:58:11Z\x1b[0m \x1b[34mDEBUG\x1b[0m acc-0 ThreadId(06) "
    z = "34dfe2f8f2f0c99272e66943746ea015"
    log = RefusalLog(window_s=10, clock=lambda: 0.0)
    assert (
        log.feed(
            dbg
            + (
                "zenoh_link_tls::unicast: Accepted TLS connection on 127.0.0.1:40451: 127.0.0.1:40554. "
                "Common Name: mallory.\n"
            )
        )
        is None
    )
    assert (
        log.feed(
            "2026-11-23T17:58:11Z  INFO acc-0 ThreadId(06) zenoh::net::routing::interceptor::access_control: "
            f"{z} did not match any configured ACL subject. Default permission `Deny` will be applied on all messages\n"
        )
        is None
    )
    told = log.feed(
        dbg + f"zenoh_transport::unicast::establishment::accept: New transport link accepted from {z} to 857bb7d2: "
        "TransportLinkUnicast { link: Link { src: tls/127.0.0.1:40451, dst: tls/127.0.0.1:40554, mtu: 49152 } }\n"
    )
    assert told is not None and told.startswith("ACL refused: CN=mallory is in no role of the inventory")
    assert (
        log.feed(line(f"Using cached result: {z} is unauthorized to Query (ingress) on @lerobot/a/b/c/server/*/status"))
        == "ACL refused: CN=mallory query (ingress) on @lerobot/a/b/c/server/*/status"
    )
    assert log.feed(dbg + "zenoh_transport::unicast::manager: New transport opened between a and b\n") is None


def test_memory_is_bounded_and_the_global_line_rate_holds_whatever_keys_a_client_invents():
    """A client refused on ever new keys (and ever new zids) cannot grow the filter nor flood the log."""
    from lerobot_fleet.router.acl_log import BURST_LINES, MAX_KEYS, MAX_LINES_PER_S, MAX_NAMES

    t = [0.0]
    log = RefusalLog(window_s=10, clock=lambda: t[0])
    printed = []
    for i in range(3 * MAX_KEYS):
        z = f"{i:032x}"
        out = log.feed(
            line(
                SUBJ.format(z=z, cn=f"arm-{i}")
                + f" is unauthorized to Put (ingress) on @lerobot/m/r/s/server/r1/obs/x{i}"
            )
        )
        if out:
            printed.append(out)
    assert len(printed) == BURST_LINES  # one instant: the burst, then nothing
    assert log.keys_remembered <= MAX_KEYS and len(log.names) <= MAX_NAMES
    t[0] = 1.0
    out = log.feed(
        line(SUBJ.format(z=Z, cn="arm-a") + " is unauthorized to Put (ingress) on @lerobot/m/r/s/server/r1/obs/late")
    )
    assert out is not None and f"{3 * MAX_KEYS - BURST_LINES} other refusal line(s) not printed" in out
    # a second later the rate allows about MAX_LINES_PER_S lines again, never the whole flood
    n = sum(
        log.feed(line(SUBJ.format(z=Z, cn="arm-a") + f" is unauthorized to Put (ingress) on @lerobot/m/r/s/k{i}"))
        is not None
        for i in range(500)
    )
    assert n <= MAX_LINES_PER_S


def test_a_full_output_never_blocks_the_filter():
    """The router writes into the filter's pipe: if the filter's own output is full, it drops lines, never waits."""
    import os
    import time

    from lerobot_fleet.router.acl_log import LineWriter

    r, w = os.pipe()
    try:
        out = LineWriter(w)
        start = time.monotonic()
        results = [out.write("ACL refused: CN=arm-a put (ingress) on @lerobot/" + "x" * 200) for _ in range(5000)]
        assert time.monotonic() - start < 5.0  # 5000 lines into a pipe nobody reads, and no wait
        assert results[0] and not results[-1] and out.dropped > 0
        while os.read(r, 65536 if True else 0):  # the reader catches up: the next line says what was lost
            try:
                import select

                if not select.select([r], [], [], 0)[0]:
                    break
            except OSError:
                break
        assert out.write("ACL refused: next")
        tail = os.read(r, 65536).decode()
        assert "line(s) dropped, output full]" in tail and tail.endswith("ACL refused: next\n")
    finally:
        os.close(r)
        os.close(w)
