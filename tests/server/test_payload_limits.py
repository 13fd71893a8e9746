"""Control payloads are sized before they are copied; zenoh sessions reassemble nothing larger than needed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import zenoh

from lerobot_policy_remote.server.control import MAX_CONTROL_BYTES, query_bytes
from lerobot_policy_remote.wire.errors import Reason, WireError
from lerobot_policy_remote.wire.header import HEADER_SIZE, peek_epoch


class _Huge:
    """A payload that reports its size and fails if anyone copies it."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def to_bytes(self) -> bytes:
        raise AssertionError("copied before its size was checked")


def test_an_oversized_control_query_is_refused_before_any_copy():
    with pytest.raises(WireError) as err:
        query_bytes(SimpleNamespace(payload=_Huge(MAX_CONTROL_BYTES + 1)))
    assert err.value.reason is Reason.OVERSIZE
    assert query_bytes(SimpleNamespace(payload=zenoh.ZBytes(b"ok"))) == b"ok"
    assert query_bytes(SimpleNamespace(payload=None)) is None


def test_an_oversized_attachment_is_never_copied_for_its_epoch():
    assert peek_epoch(_Huge(10 * HEADER_SIZE)) == 0


def test_routers_servers_and_consoles_set_a_message_size_limit_and_close_expired_links():
    from lerobot_fleet.cli import _settings, build_parser
    from lerobot_fleet.router.router import router_settings

    from lerobot_policy_remote.zenoh_config import CONSOLE_MAX_MESSAGE_BYTES, OBS_SLACK_BYTES, ROUTER_MAX_MESSAGE_BYTES

    router = router_settings(["tcp/127.0.0.1:7447"]).to_dict()
    assert router["transport"]["link"]["rx"]["max_message_size"] == ROUTER_MAX_MESSAGE_BYTES < 2**30
    console = _settings(build_parser().parse_args(["status"])).to_dict()
    assert console["transport"]["link"]["rx"]["max_message_size"] == CONSOLE_MAX_MESSAGE_BYTES
    from lerobot_policy_remote.server.manifest import Manifest
    from lerobot_policy_remote.server.serving_zenoh import serving_zenoh_settings

    z = serving_zenoh_settings(Manifest(max_obs_bytes=1_000_000), batch_limit=1)
    assert z.to_dict()["transport"]["link"]["rx"]["max_message_size"] == 1_000_000 + OBS_SLACK_BYTES
    # the limit is a key zenoh 1.10 accepts, and TLS sessions close a link when its certificate expires
    from lerobot_policy_remote.zenoh_config import ZenohSettings

    tls = ZenohSettings(
        mode="client", connect_endpoints=["tls/127.0.0.1:1"], tls_root_ca_certificate="ca.crt", max_message_bytes=5000
    )
    tls.validate = lambda: None  # no files needed to inspect the generated config
    conf = tls.to_dict()
    assert conf["transport"]["link"]["tls"]["close_link_on_expiration"] is True
    cfg = zenoh.Config.from_json5(__import__("json").dumps(conf))
    assert cfg.get_json("transport/link/rx/max_message_size") == "5000"
