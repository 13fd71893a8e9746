"""`lerobot-policy-server` entry point."""

from __future__ import annotations

import sys

USAGE = """usage: lerobot-policy-server --manifest server.yaml [--model.repo_or_path=... --max_sessions=...]

Serve one pre-warmed lerobot policy to many robots over Zenoh.
See docs/user-guide.md for the manifest fields."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    print("lerobot-policy-server: serving is not implemented yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
