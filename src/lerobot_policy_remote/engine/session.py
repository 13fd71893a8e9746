"""The robot's view of its current server session, and the rules for accepting a new one (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.codes import Refusal
from ..wire.messages import SCHEMA_MAX, SCHEMA_MIN, SCHEMA_VERSION
from .handshake import HandshakeError, OpenedSession


@dataclass
class RemoteSession:
    session_id: str = ""
    replica: str = ""
    fingerprint: str = ""  # pinned by the first session: a later one must serve the same model
    epoch: int = 0  # bumped per session: replies of an older session are never merged
    rtc_active: bool = False
    chunk_size: int = 0
    schema_version: int = (
        SCHEMA_VERSION  # negotiated at session open: stamped on every request, required of every chunk
    )
    action_order_checked: bool | None = None  # None before a session: did the server compare our action names + order?
    image_sizes: dict[str, tuple[int, int]] = field(default_factory=dict)  # trained (h, w) per camera, from the ack
    same_host: bool = False  # this replica is reached over shared memory: frames need no JPEG

    def accept(self, opened: OpenedSession, action_names: list[str], rtc_wanted: bool, repin: str = "") -> None:
        """Adopt a session the server opened, or raise (fatal) when it breaks the robot's contract.

        `repin`: the fingerprint an operator's move pins instead of the current one (engine/moves.py): the one way
        the pinned model changes, and only to exactly that fingerprint. Without it a change of model is fatal."""
        ack = opened.ack
        if not SCHEMA_MIN <= ack.schema_version <= SCHEMA_MAX:
            raise HandshakeError(
                f"the server chose schema version {ack.schema_version}, this robot speaks {SCHEMA_MIN}..{SCHEMA_MAX}: "
                "upgrade lerobot_policy_remote on the older side",
                fatal=True,
                code=Refusal.SCHEMA_MISMATCH,
            )
        if ack.action_names and list(ack.action_names) != list(action_names):
            raise HandshakeError(
                "Action name/order mismatch between server policy and this robot "
                f"(server {ack.action_names}, robot {action_names})",
                fatal=True,
                code=Refusal.ACTION_MISMATCH,
            )
        fp = ack.model.fingerprint
        if repin and fp != repin:
            raise HandshakeError(
                f"replica {ack.replica} serves checkpoint {fp[:12] or '(none named)'}, not {repin[:12]} as the move "
                "asked: refusing to execute its chunks",
                fatal=True,
                code=Refusal.MODEL_MISMATCH,
            )
        if not repin and self.fingerprint and fp and fp != self.fingerprint:
            raise HandshakeError(
                "the server now runs a different model/revision/checkpoint than this session was opened with: "
                "refusing to execute its chunks",
                fatal=True,
                code=Refusal.MODEL_MISMATCH,
            )
        self.fingerprint = repin or self.fingerprint or fp
        self.replica = ack.replica or opened.status.replica
        self.session_id = ack.session_id
        self.epoch += 1
        self.rtc_active = bool(ack.rtc_active) and rtc_wanted
        self.chunk_size = ack.chunk_size
        self.schema_version = ack.schema_version
        # Older servers send no flag; their ack names the actions exactly when they checked them.
        self.action_order_checked = bool(ack.action_names_checked or ack.action_names)
        self.same_host = opened.same_host
        self.image_sizes = {
            k: (int(v[0]), int(v[1]))
            for k, v in ack.image_sizes.items()
            if len(v) == 2 and all(0 < int(x) <= 65535 for x in v)
        }
