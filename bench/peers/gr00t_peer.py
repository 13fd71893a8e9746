"""GR00T-style arm: ZMQ REQ/REP, msgpack with each ndarray wrapped in `np.save` bytes, one serial loop.

Written from Isaac-GR00T's published design (`gr00t/policy/server_client.py`; GR00T is not on
PyPI, so both sides are ours): request `{endpoint, data}`, endpoints ping/get_action/reset/kill,
`recv -> handler -> send` on one REP socket, errors returned as `{"error": ...}`. Like upstream's
client, ours sets no receive timeout: a dead server blocks it (the fault runs bound it from outside).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack
import numpy as np
from numpy.typing import NDArray

from .openpi_peer import make_policy
from .workload import CAMERAS, Images

if TYPE_CHECKING:  # imported where a socket is made, as upstream's client does
    import zmq


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        buf = io.BytesIO()
        np.save(buf, obj, allow_pickle=False)
        return {"__ndarray_class__": True, "as_npy": buf.getvalue()}
    return obj


def _decode(obj: Any) -> Any:
    if isinstance(obj, dict) and "__ndarray_class__" in obj:
        return np.load(io.BytesIO(obj["as_npy"]), allow_pickle=False)
    return obj


def to_bytes(data: Any) -> bytes:
    packed: bytes = msgpack.packb(data, default=_encode)  # msgpack ships no types: its result is typed here
    return packed


def from_bytes(data: bytes) -> Any:
    return msgpack.unpackb(data, object_hook=_decode)


def _as_obs(d: dict[str, Any]) -> dict[str, Any]:
    """GR00T's `video.<cam>` (1, H, W, 3) + `state` -> the policy's observation dict."""
    obs = {f"observation/{'image' if c == CAMERAS[0] else c + '_image'}": d[f"video.{c}"][0] for c in CAMERAS}
    obs["observation/state"] = d["state"]
    return obs


def serve(
    host: str, port: int, sleep_s: float, ready: Callable[[], None], act_path: str = "", vla_path: str = ""
) -> None:
    import zmq

    policy = make_policy(sleep_s, act_path, vla_path)
    sock = zmq.Context().socket(zmq.REP)
    sock.bind(f"tcp://{host}:{port}")
    endpoints: dict[str, Callable[[Any], dict[str, Any]]] = {  # the request's decoded `data` -> the reply
        "ping": lambda d: {"status": "ok"},
        "reset": lambda d: {"status": "ok"},
        "get_action": lambda d: {"actions": policy.infer(_as_obs(d))["actions"]},
    }
    ready()
    while True:
        request = from_bytes(sock.recv())
        try:
            endpoint = request.get("endpoint", "get_action")
            if endpoint == "kill":
                sock.send(to_bytes({"status": "ok"}))
                return
            sock.send(to_bytes(endpoints[endpoint](request.get("data"))))
        except Exception as exc:  # upstream answers every request, errors included
            sock.send(to_bytes({"error": str(exc)}))


class Client:
    """One robot: a REQ socket in lockstep (send, then block on recv)."""

    def __init__(self, host: str, port: int, robot: int = 0) -> None:
        import zmq

        self.sock: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
        self.sock.connect(f"tcp://{host}:{port}")
        self.robot = robot

    def call(self, endpoint: str, data: Any = None) -> Any:
        self.sock.send(to_bytes({"endpoint": endpoint, "data": data}))
        reply = from_bytes(self.sock.recv())
        if isinstance(reply, dict) and "error" in reply:
            raise RuntimeError(f"server error: {reply['error']}")
        return reply

    def infer(self, images: Images, state: NDArray[np.float32]) -> NDArray[np.float32]:
        data: dict[str, NDArray[np.uint8] | NDArray[np.float32]] = {
            f"video.{c}": img[None] for c, img in images.items() if c in CAMERAS
        }
        data["state"] = state
        return np.asarray(self.call("get_action", data)["actions"])

    def close(self) -> None:
        self.sock.close(linger=0)
