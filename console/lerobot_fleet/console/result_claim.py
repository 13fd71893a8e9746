"""Whether the result line is still true: an action's result names a state its targets were left in, and a later
change (another operator's verb, a script, a restart) can undo it while the line still says it."""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot_fleet.data.model import ServerRow

# What a successful action leaves its replica in: (field of the server row, the value it reads then, the words
# for the other value when something later changed it back).
CLAIMS: dict[str, tuple[str, bool, str]] = {
    "cordon": ("cordoned", True, "uncordoned"),
    "uncordon": ("cordoned", False, "cordoned"),
    "drain": ("draining", True, "no longer draining"),
}


@dataclass
class ResultClaim:
    """The state a result line claims for its targets. A target counts once a snapshot shows it in that state (the
    row lags the reply by a status poll); from then on, a row showing the other state makes the line old."""

    kind: str
    targets: tuple[str, ...]
    seen: set[str] = field(default_factory=set)

    def changed_since(self, servers: dict[str, ServerRow]) -> str:
        """'' while the line holds; else what changed ("gpu-a is uncordoned now"), for the line to say so."""
        claim = CLAIMS.get(self.kind)
        if claim is None:
            return ""
        attr, value, other = claim
        changed = []
        for target in self.targets:
            row = servers.get(target)
            if row is None or row.is_stale:
                continue  # a replica gone or not heard from says nothing new about it
            if getattr(row, attr) == value:
                self.seen.add(target)
            elif target in self.seen:
                changed.append(target)
        if not changed:
            return ""
        return f"{', '.join(changed)} {'is' if len(changed) == 1 else 'are'} {other} now"
