"""Strings a peer controls, made safe to print: no control characters, no terminal escapes, bounded length.

Every string that came over the network and reaches a log line, a terminal or the console goes through
`printable` (ids in keys are validated by `keys.check_id` already; free text such as tasks, messages and
ids inside payloads are not).
"""

from __future__ import annotations

import re

# C0 controls except none (tab and newline would forge log lines too), DEL, C1 controls, and the Unicode
# bidi overrides that can make a line read differently from what it holds.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: object, limit: int = 200) -> str:
    """`text` with every control character replaced by '?' and cut to `limit` characters (marked with '…')."""
    s = text if type(text) is str else str(text)
    if not s.isprintable():  # C-speed check first: the console cleans every string of ~20,000 samples/s
        s = _UNSAFE.sub("?", s)
    return s if len(s) <= limit else s[: limit - 1] + "…"
