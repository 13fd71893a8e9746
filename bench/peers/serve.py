"""One peer server as its own process: `python -m bench.peers.serve SYSTEM --port P --sleep S`.

Prints `PEER READY` once it accepts requests. Logging is turned down to warnings for every system
(legacy logs each request at INFO), so no arm pays for its log lines.
"""

from __future__ import annotations

import argparse
import logging


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("system", choices=["ours", "legacy", "openpi", "gr00t"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--endpoint", default="", help="ours: the router's zenoh endpoint")
    ap.add_argument("--sleep", type=float, default=0.0, help="stub inference time S in seconds")
    ap.add_argument("--shm", action="store_true", help="ours: zenoh shared memory on (the defaults on one machine)")
    ap.add_argument("--act", default="", help="serve this ACT checkpoint (bench.peers.act) instead of the stub")
    ap.add_argument(
        "--vla",
        default="",
        help="openpi/gr00t: serve this pi0 checkpoint (bench.peers.vla, no RTC) instead of the stub",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.disable(logging.INFO)

    def ready() -> None:
        print("PEER READY", flush=True)

    if args.system == "ours":
        from .ours_peer import serve as serve_ours

        serve_ours(args.endpoint, args.sleep, ready, args.shm)
    elif args.system == "legacy":
        from .legacy_peer import serve as serve_legacy

        serve_legacy(args.host, args.port, args.sleep, ready, args.act)
    elif args.system == "openpi":
        from .openpi_peer import serve as serve_openpi

        serve_openpi(args.host, args.port, args.sleep, ready, args.act, args.vla)
    else:
        from .gr00t_peer import serve as serve_gr00t

        serve_gr00t(args.host, args.port, args.sleep, ready, args.act, args.vla)


if __name__ == "__main__":
    main()
