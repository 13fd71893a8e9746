"""openpi-style arm: websocket + msgpack-numpy, one blocking inference at a time on the event loop.

Client: the real `openpi_client.WebsocketClientPolicy` from PyPI. Server: written from openpi's
published design (`src/openpi/serving/websocket_policy_server.py`, not on PyPI): metadata frame on
connect, `compression=None, max_size=None`, `policy.infer` called inline in the connection handler
(so every client waits for every other, openpi issue #717), `server_timing` added to each reply,
errors as a text frame then close 1011, `GET /healthz`. It uses openpi-client's own msgpack_numpy,
as the upstream server does.
"""

from __future__ import annotations

import asyncio
import http
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from openpi_client import msgpack_numpy  # type: ignore[import-untyped]  # openpi-client ships no type information

from .workload import CAMERAS, Images, stub_chunk


class StubPolicy:
    """Sleeps S (like a GPU wait) and returns the fixed chunk: the same stub every arm runs."""

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        time.sleep(self.sleep_s)
        return {"actions": stub_chunk(obs["observation/state"])}


def _health_check(connection: Any, request: Any) -> Any:
    if request.path == "/healthz":
        return connection.respond(http.HTTPStatus.OK, "OK\n")
    return None


async def _handler(websocket: Any, policy: Any, metadata: dict[str, Any]) -> None:
    import websockets

    packer = msgpack_numpy.Packer()
    await websocket.send(packer.pack(metadata))
    prev_total = None
    while True:
        try:
            start = time.monotonic()
            obs = msgpack_numpy.unpackb(await websocket.recv())
            t_infer = time.monotonic()
            action = policy.infer(obs)  # inline on the event loop, as upstream
            action["server_timing"] = {"infer_ms": (time.monotonic() - t_infer) * 1000}
            if prev_total is not None:
                action["server_timing"]["prev_total_ms"] = prev_total * 1000
            await websocket.send(packer.pack(action))
            prev_total = time.monotonic() - start
        except websockets.ConnectionClosed:
            break
        except Exception:
            await websocket.send(traceback.format_exc())
            await websocket.close(code=1011, reason="Internal server error. Traceback included in previous frame.")
            raise


def make_policy(sleep_s: float, act_path: str = "", vla_path: str = "") -> Any:
    if act_path:
        from .act import ActPolicy

        return ActPolicy(act_path)
    if vla_path:
        from .vla import VlaPolicy

        return VlaPolicy(vla_path)
    return StubPolicy(sleep_s)


def serve(
    host: str, port: int, sleep_s: float, ready: Callable[[], None], act_path: str = "", vla_path: str = ""
) -> None:
    from websockets.asyncio.server import serve as ws_serve

    name = "act" if act_path else "pi0" if vla_path else "stub"
    policy, metadata = make_policy(sleep_s, act_path, vla_path), {"policy": name, "action_horizon": 50}

    async def main() -> None:
        async with ws_serve(
            lambda ws: _handler(ws, policy, metadata),
            host,
            port,
            compression=None,
            max_size=None,
            process_request=_health_check,
        ) as server:
            ready()
            await server.serve_forever()

    asyncio.run(main())


class Client:
    """One robot: openpi-client's synchronous WebsocketClientPolicy, raw frames (no JPEG): full 640x480, or with
    `resize` the robot-side `image_tools.resize_with_pad` to resize x resize that openpi's examples do."""

    def __init__(self, host: str, port: int, robot: int = 0, resize: int = 0) -> None:
        from openpi_client.websocket_client_policy import WebsocketClientPolicy  # type: ignore[import-untyped]

        self.policy = WebsocketClientPolicy(host=host, port=port)
        self.robot, self.resize = robot, resize

    def infer(self, images: Images, state: NDArray[np.float32]) -> NDArray[np.float32]:
        if self.resize:
            from openpi_client import image_tools

            images = {
                c: image_tools.convert_to_uint8(image_tools.resize_with_pad(img, self.resize, self.resize))
                for c, img in images.items()
            }
        obs: dict[str, NDArray[np.uint8] | NDArray[np.float32]] = {
            f"observation/{'image' if c == CAMERAS[0] else c + '_image'}": img for c, img in images.items()
        }
        obs["observation/state"] = state
        return np.asarray(self.policy.infer(obs)["actions"])

    def close(self) -> None:
        self.policy._ws.close()
