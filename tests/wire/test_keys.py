import pytest
import zenoh

from lerobot_policy_remote.wire import ServiceKeys, WireError, check_id, encode_segment, parse_key, slug_task
from lerobot_policy_remote.wire.keys import ROOT, check_segment, decode_segment


@pytest.mark.parametrize(
    "text", ["fold the towel", "a/b", "x*y", "$*", "what?", "#1", "@admin", "100%", "naïve", "a//b", "/lead", "trail/"]
)
def test_encoded_segments_are_valid_single_chunks_and_reversible(text):
    chunk = encode_segment(text)
    check_segment(chunk, "t")
    assert decode_segment(chunk) == text
    key = f"{ROOT}/{chunk}/x"
    zenoh.KeyExpr(key)  # zenoh accepts it
    assert len(key.split("/")) == 3  # still exactly one chunk


def test_slug_is_injective_so_collisions_cannot_happen():
    tasks = [
        "fold the towel",
        "fold_the_towel",
        "fold-the-towel",
        "fold%20the%20towel",
        "Fold the towel",
        "fold/the/towel",
    ]
    assert len({slug_task(t) for t in tasks}) == len(tasks)


@pytest.mark.parametrize("bad", ["", "*", "a*b", "a$b", "a?b", "a#b", "a/b", "@x"])
def test_check_segment_rejects_spec_cases(bad):
    with pytest.raises(WireError):
        check_segment(bad, "seg")


def test_empty_free_text_is_refused():
    with pytest.raises(WireError, match="model_id"):
        encode_segment("", "model_id")


@pytest.mark.parametrize("bad", ["", "a/b", "robot*", "-lead", "x" * 65, "sp ace", "@r"])
def test_ids_are_validated_not_escaped(bad):
    with pytest.raises(WireError, match="client_uuid"):
        check_id(bad, "client_uuid")


def test_root_is_verbatim_and_not_matched_by_double_star():
    keys = ServiceKeys.for_service("lerobot/act_test", "main", "pick up")
    assert keys.base.startswith("@lerobot/")
    assert not zenoh.KeyExpr("**").intersects(zenoh.KeyExpr(keys.robot("r1", "action")))


def test_builder_and_parser_round_trip():
    keys = ServiceKeys.for_service("user/model", "v1.0", "fold the towel")
    obs = parse_key(keys.obs("rep-1", "robot-07"))
    assert (obs.model_id, obs.revision, obs.service, obs.role, obs.ident, obs.leaf, obs.robot) == (
        "user/model",
        "v1.0",
        "fold the towel",
        "server",
        "rep-1",
        "obs",
        "robot-07",
    )
    tel = parse_key(keys.robot("robot-07", "telemetry"))
    assert (tel.role, tel.robot, tel.leaf) == ("robot", "robot-07", "telemetry")
    assert tel.service_keys == keys


def test_single_depth_wildcards_match_only_their_leaf():
    keys = ServiceKeys.for_service("m", "main", "t")
    sub = zenoh.KeyExpr(keys.obs("rep-1", "*"))
    assert sub.intersects(zenoh.KeyExpr(keys.obs("rep-1", "robot-1")))
    assert not sub.intersects(zenoh.KeyExpr(keys.obs("rep-2", "robot-1")))
    assert not sub.intersects(zenoh.KeyExpr(keys.server("rep-1", "status")))
    any_tel = zenoh.KeyExpr(ServiceKeys.any().robot("*", "telemetry"))
    assert any_tel.intersects(zenoh.KeyExpr(keys.robot("robot-1", "telemetry")))
    assert not any_tel.intersects(zenoh.KeyExpr(keys.robot("robot-1", "alive")))


@pytest.mark.parametrize(
    "key",
    [
        "other/a/b/c/server/r/status",
        "@lerobot/m/r/s/server/r/bogus",
        "@lerobot/m/r/s/robot/a*b/alive",
        "@lerobot/m/r/s/thing/x/alive",
        "@lerobot/m",
        "@lerobot/m/r/s/server/r/obs",
    ],
)
def test_parse_rejects_foreign_keys(key):
    with pytest.raises(WireError):
        parse_key(key)


def test_parsed_key_namespace_is_one_value():
    keys = ServiceKeys.for_service("user/model", "v1.0", "fold the towel")
    a, b = parse_key(keys.obs("rep-1", "robot-07")), parse_key(keys.robot("robot-07", "alive"))
    assert a.namespace == b.namespace == ("user/model", "v1.0", "fold the towel")
    assert a.namespace.keys == keys  # and it rebuilds the escaped keys it came from
    other = parse_key(ServiceKeys.for_service("user/model", "v1.1", "fold the towel").robot("robot-07", "alive"))
    assert other.namespace != a.namespace and len({a.namespace, b.namespace, other.namespace}) == 2
