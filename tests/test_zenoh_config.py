import json

import pytest

from lerobot_policy_remote.zenoh_config import ZenohConfigError, ZenohSettings, load_json5


def test_client_config_has_multicast_off_lease_and_retry():
    conf = ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"], lease_ms=800).to_dict()
    assert conf["scouting"]["multicast"]["enabled"] is False
    assert conf["transport"]["link"]["tx"] == {"lease": 800, "keep_alive": 4}
    assert conf["connect"]["retry"]["period_max_ms"] == 1000
    ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"]).build()


def test_extra_json5_merges_key_by_key(tmp_path):
    extra = tmp_path / "extra.json5"
    extra.write_text(
        "{\n // comments and trailing commas are JSON5\n transport: { link: { tx: { lease: 3000, }, }, },\n}\n"
    )
    conf = ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"], extra_json5=str(extra)).to_dict()
    assert conf["transport"]["link"]["tx"] == {"lease": 3000, "keep_alive": 4}
    assert conf["scouting"]["multicast"]["enabled"] is False
    assert load_json5("{a: 1,}") == {"a": 1}


def test_mtls_is_enabled_with_client_cert(tmp_path):
    for name in ("ca.pem", "c.pem", "c.key"):
        (tmp_path / name).write_text("x")
    s = ZenohSettings(
        mode="client",
        connect_endpoints=["tls/127.0.0.1:7447"],
        tls_root_ca_certificate=str(tmp_path / "ca.pem"),
        tls_connect_certificate=str(tmp_path / "c.pem"),
        tls_connect_private_key=str(tmp_path / "c.key"),
    )
    tls = s.to_dict()["transport"]["link"]["tls"]
    assert tls["enable_mtls"] is True and tls["connect_certificate"].endswith("c.pem")
    json.dumps(s.to_dict())


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"mode": "bogus"}, "not one of"),
        ({"mode": "client"}, "connect endpoint"),
        ({"mode": "router"}, "listen endpoint"),
        ({"mode": "client", "connect_endpoints": ["tls/h:1"]}, "tls_root_ca_certificate"),
        ({"mode": "client", "connect_endpoints": ["tcp/h:1"], "tls_connect_certificate": "/nope"}, "together"),
        (
            {"mode": "client", "connect_endpoints": ["tcp/h:1"], "tls_root_ca_certificate": "/nope.pem"},
            "does not exist",
        ),
    ],
)
def test_bad_settings_say_what_to_fix(kwargs, match):
    with pytest.raises(ZenohConfigError, match=match):
        ZenohSettings(**kwargs).to_dict()


def test_unreachable_router_gives_actionable_error():
    from lerobot_policy_remote.testing.procs import free_port
    from lerobot_policy_remote.zenoh_config import open_session

    with pytest.raises(ZenohConfigError, match="router is running"):
        open_session(
            ZenohSettings(mode="client", connect_endpoints=[f"tcp/127.0.0.1:{free_port()}"], connect_timeout_ms=300)
        )


def test_observations_leave_robots_and_routers_through_a_deep_data_queue():
    """A raw 1.84 MB observation is 29 fragments: robots and routers queue 16 DATA batches, zenoh accepts both
    queues."""
    from lerobot.policies.rtc.configuration_rtc import RTCConfig
    from lerobot_fleet.router.router import router_settings

    from lerobot_policy_remote.engine.config import RemoteInferenceConfig
    from lerobot_policy_remote.zenoh_config import OBS_TX_QUEUE_BATCHES

    robot = RemoteInferenceConfig(connect_endpoint="tcp/127.0.0.1:7447", rtc=RTCConfig(enabled=False)).zenoh_settings()
    router = router_settings(["tcp/127.0.0.1:7447"])
    for s in (robot, router):
        assert s.to_dict()["transport"]["link"]["tx"]["queue"]["size"] == {"data": OBS_TX_QUEUE_BATCHES} == {"data": 16}
    both = ZenohSettings(
        mode="client", connect_endpoints=["tcp/127.0.0.1:7447"], tx_queue_data=16, tx_queue_interactive_high=8
    )
    assert both.to_dict()["transport"]["link"]["tx"]["queue"]["size"] == {"interactive_high": 8, "data": 16}
    both.build()  # zenoh takes the keys
    assert (
        "queue"
        not in ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"]).to_dict()["transport"]["link"][
            "tx"
        ]
    )
    with pytest.raises(ZenohConfigError, match="tx_queue_data must be 0"):
        ZenohSettings(mode="client", connect_endpoints=["tcp/127.0.0.1:7447"], tx_queue_data=17).to_dict()
