"""`python -m lerobot_policy_remote.sim.vla_policy KIND DIR`: the demo's tiny offline VLA checkpoint.

KIND is `smolvla`, `pi0` or `pi05`; the checkpoint (random weights, one `front` camera, a 30-step chunk) is
built by the test kit's `testing.vla` with nothing downloaded. `lerobot-fleet demo --policy KIND` runs this
in a child process, so the demo itself never imports torch or lerobot. A pi0 / pi0.5 checkpoint has the
tiny sizes of `testing.tiny_pi`: every process that loads it needs `tiny_pi.SITE_DIR` on its PYTHONPATH.
"""

from __future__ import annotations

import argparse

KINDS = ("smolvla", "pi0", "pi05")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lerobot_policy_remote.sim.vla_policy",
        description="Build a tiny offline SmolVLA / pi0 / pi0.5 checkpoint (random weights).",
    )
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("path", help="directory the checkpoint is saved to")
    args = parser.parse_args(argv)
    from lerobot_policy_remote.sim.toy import write_action_names
    from lerobot_policy_remote.testing.vla import SAVERS

    out = SAVERS[args.kind](args.path)
    write_action_names(out)  # the demo's arms are sim arms: their order is checked by name
    print(f"saved tiny {args.kind} policy to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
