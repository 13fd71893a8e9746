"""The one key-expression builder and parser.

Layout (every segment after the root is user-derived and sanitised)::

    @lerobot/<model>/<revision>/<service>/server/<replica>/status      queryable: capabilities + load
    @lerobot/<model>/<revision>/<service>/server/<replica>/session/<robot>  queryable: open a session
    @lerobot/<model>/<revision>/<service>/server/<replica>/reset/<robot>    queryable: acked episode reset
    @lerobot/<model>/<revision>/<service>/server/<replica>/drain       queryable: operator drain
    @lerobot/<model>/<revision>/<service>/server/<replica>/cordon      queryable: operator cordon / uncordon
    @lerobot/<model>/<revision>/<service>/server/<replica>/alive       liveliness token
    @lerobot/<model>/<revision>/<service>/server/<replica>/audit       audit lines (JSON)
    @lerobot/<model>/<revision>/<service>/server/<replica>/obs/<robot> observations, to one replica only
    @lerobot/<model>/<revision>/<service>/robot/<robot>/action         action chunks and events
    @lerobot/<model>/<revision>/<service>/robot/<robot>/alive          liveliness token
    @lerobot/<model>/<revision>/<service>/robot/<robot>/telemetry      link state for the console
    @lerobot/<model>/<revision>/<service>/robot/<robot>/episode_reset  queryable: operator reset
    @lerobot/<model>/<revision>/<service>/robot/<robot>/move           queryable: move to another model (rollouts)
    @lerobot/fleet/rollout/status                                      queryable: the fleet's rollout (fleet router)
    @lerobot/fleet/rollout/control                                     queryable: start / promote / abort (operators)

The robot's id is in every key a robot sends on (obs, session, reset): the router's ACL lets robot R
use only its own, and the server trusts the key, never an id inside a payload.

Free text (model ids, revisions, task-derived service names) is percent-escaped, which is
injective: two different strings can never share a key. Identifiers (robot uuids, replica ids)
are validated instead and refused with a clear error.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import quote, unquote

from .errors import WireError

ROOT = "@lerobot"
WILD = "*"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SAFE = "-._~"  # RFC 3986 unreserved besides alphanumerics: never escaped
_FORBIDDEN = set("*$?#/")
MAX_SEGMENT_LEN = 200

SERVER_LEAVES = ("status", "drain", "cordon", "alive", "audit")
ROBOT_SCOPED_SERVER_LEAVES = ("obs", "session", "reset")  # server/<replica>/<leaf>/<robot>
ROBOT_LEAVES = ("action", "alive", "telemetry", "episode_reset", "move")
# The fleet's rollout, kept by the fleet router (outside every service namespace: a rollout spans two of them).
FLEET_ROOT = f"{ROOT}/fleet"
ROLLOUT_STATUS_KEY = f"{FLEET_ROOT}/rollout/status"
ROLLOUT_CONTROL_KEY = f"{FLEET_ROOT}/rollout/control"
# Selector parameter of a status query that asks for the status without its session list: what a robot's
# discovery needs (seats, load, draining), O(1) per reply instead of O(sessions). A replica that
# does not know it ignores it and sends the whole status, which the robot reads the same way.
BRIEF_STATUS = "sessions=0"


def encode_segment(text: str, field: str = "segment") -> str:
    """Free text -> one key chunk: non-empty, no `* $ ? # /`, no leading `@`, reversible."""
    if not isinstance(text, str) or not text:
        raise WireError(field, "must be a non-empty string")
    chunk = quote(text, safe=_SAFE)
    if len(chunk) > MAX_SEGMENT_LEN:
        raise WireError(field, f"too long for a key ({len(chunk)} > {MAX_SEGMENT_LEN} chars once escaped)")
    return chunk


def decode_segment(chunk: str) -> str:
    """Inverse of :func:`encode_segment`."""
    return unquote(chunk)


def slug_task(task: str) -> str:
    """The default service name for a task string (the server's `default_task`, the robot's `--task`)."""
    return encode_segment(task.strip(), "task")


def check_id(value: str, field: str) -> str:
    """Identifiers go into keys verbatim, so they must already be plain."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise WireError(
            field,
            f"{value!r} is not a valid id: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return value


def check_segment(chunk: str, field: str) -> str:
    """Reject a raw key chunk that would change what a key matches."""
    if not chunk:
        raise WireError(field, "empty key chunk")
    bad = sorted(_FORBIDDEN.intersection(chunk))
    if bad:
        raise WireError(field, f"forbidden character(s) {''.join(bad)!r} in key chunk {chunk!r}")
    if chunk.startswith("@"):
        raise WireError(field, f"key chunk {chunk!r} may not start with '@' (verbatim chunk)")
    return chunk


@dataclass(frozen=True)
class ServiceKeys:
    """Keys of one service namespace: `(model, revision, service)`.

    Any of the three may be the single-chunk wildcard `*` (for the console and operator verbs).
    """

    model: str
    revision: str
    service: str

    @classmethod
    def for_service(cls, model_id: str, revision: str, service_name: str) -> ServiceKeys:
        return cls(
            encode_segment(model_id, "model_id"),
            encode_segment(revision, "revision"),
            encode_segment(service_name, "service"),
        )

    @classmethod
    def any(cls) -> ServiceKeys:
        return cls(WILD, WILD, WILD)

    @property
    def base(self) -> str:
        return f"{ROOT}/{self.model}/{self.revision}/{self.service}"

    def server(self, replica: str, leaf: str) -> str:
        if leaf not in SERVER_LEAVES:
            raise ValueError(f"unknown server leaf {leaf!r}")
        return f"{self.base}/server/{_id_or_wild(replica, 'replica')}/{leaf}"

    def obs(self, replica: str, robot: str) -> str:
        return self._robot_scoped(replica, "obs", robot)

    def session(self, replica: str, robot: str) -> str:
        """Where robot `robot` opens its session on `replica` (the server answers on this exact key)."""
        return self._robot_scoped(replica, "session", robot)

    def reset(self, replica: str, robot: str) -> str:
        """Where robot `robot` resets its episode on `replica`."""
        return self._robot_scoped(replica, "reset", robot)

    def _robot_scoped(self, replica: str, leaf: str, robot: str) -> str:
        return f"{self.base}/server/{_id_or_wild(replica, 'replica')}/{leaf}/{_id_or_wild(robot, 'client_uuid')}"

    def robot(self, robot: str, leaf: str) -> str:
        if leaf not in ROBOT_LEAVES:
            raise ValueError(f"unknown robot leaf {leaf!r}")
        return f"{self.base}/robot/{_id_or_wild(robot, 'client_uuid')}/{leaf}"


def _id_or_wild(value: str, field: str) -> str:
    return value if value == WILD else check_id(value, field)


class Namespace(NamedTuple):
    """The decoded `(model_id, revision, service)` a key lives in: one value for maps and comparisons."""

    model_id: str
    revision: str
    service: str

    @property
    def keys(self) -> ServiceKeys:
        return ServiceKeys.for_service(self.model_id, self.revision, self.service)


@dataclass(frozen=True)
class ParsedKey:
    """What a received key names. `role` is 'server' or 'robot'; `robot` is set for obs keys too."""

    namespace: Namespace
    role: str
    ident: str
    leaf: str
    robot: str | None = None

    @property
    def model_id(self) -> str:
        return self.namespace.model_id

    @property
    def revision(self) -> str:
        return self.namespace.revision

    @property
    def service(self) -> str:
        return self.namespace.service

    @property
    def service_keys(self) -> ServiceKeys:
        return self.namespace.keys


def parse_key(key: str) -> ParsedKey:
    """Parse any key of our tree; raises WireError for anything else."""
    return _parse_key(str(key))


@functools.lru_cache(maxsize=4096)  # every observation and telemetry sample parses its key; a bad key is never cached
def _parse_key(key: str) -> ParsedKey:
    parts = key.split("/")
    if len(parts) < 7 or parts[0] != ROOT:
        raise WireError("key", f"{key!r} is not a {ROOT} key")
    _, model, revision, service, role, ident, leaf, *rest = parts
    for name, chunk in (("model_id", model), ("revision", revision), ("service", service)):
        check_segment(chunk, name)
    robot = None
    if role == "server":
        check_id(ident, "replica")
        if leaf in ROBOT_SCOPED_SERVER_LEAVES and len(rest) == 1:
            robot = check_id(rest[0], "client_uuid")
        elif leaf not in SERVER_LEAVES or rest:
            raise WireError("key", f"unknown server key {key!r}")
    elif role == "robot":
        robot = check_id(ident, "client_uuid")
        if leaf not in ROBOT_LEAVES or rest:
            raise WireError("key", f"unknown robot key {key!r}")
    else:
        raise WireError("key", f"unknown role {role!r} in {key!r}")
    ns = Namespace(decode_segment(model), decode_segment(revision), decode_segment(service))
    return ParsedKey(ns, role, ident, leaf, robot)
