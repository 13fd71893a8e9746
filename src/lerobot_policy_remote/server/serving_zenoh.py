"""The zenoh settings a replica serves with (the manifest's, plus what serving needs), and how the start line names
where it connects and listens. Functions of their own so that these limits can be checked without starting a server.
"""

from __future__ import annotations

import dataclasses

from ..zenoh_config import OBS_SLACK_BYTES, ZenohSettings
from .manifest import Manifest


def zenoh_where(z: ZenohSettings) -> str:
    """`connect=a,b listen=c`: the endpoints this session dials and listens on (no spaces inside a value)."""
    parts = ([f"connect={','.join(z.connect_endpoints)}"] if z.connect_endpoints else []) + (
        [f"listen={','.join(z.listen_endpoints)}"] if z.listen_endpoints else []
    )
    return " ".join(parts)


def serving_zenoh_settings(manifest: Manifest, batch_limit: int) -> ZenohSettings:
    """The zenoh settings a replica opens with: the manifest's, plus what serving needs. A batching server publishes
    a burst of chunks per pass: deepen the chunk priority's TX queue (unless set). No message larger than an
    observation `max_obs_bytes` allows is reassembled (unless set). A function of its own so that these limits can be
    checked without starting a server."""
    z = manifest.zenoh_settings()
    if not z.max_message_bytes:
        z = dataclasses.replace(z, max_message_bytes=manifest.max_obs_bytes + OBS_SLACK_BYTES)
    if batch_limit > 1 and not z.tx_queue_interactive_high:
        return dataclasses.replace(z, tx_queue_interactive_high=16)
    return z
