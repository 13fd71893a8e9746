"""A real ACT (random weights, relative-action pipeline) served in-process over the real router."""

from __future__ import annotations

import threading
import urllib.request
import uuid

import numpy as np
import pytest
import torch
from conftest import make_manifest

from lerobot_policy_remote.server.metrics import PREFIX
from lerobot_policy_remote.server.service import PolicyServer
from lerobot_policy_remote.testing.fake_robot import FakeRobot, default_features
from lerobot_policy_remote.testing.policies import SIM_ARM_ACTION_NAMES
from lerobot_policy_remote.wire.codec import encode
from lerobot_policy_remote.wire.data import ActionChunkMsg
from lerobot_policy_remote.wire.header import Header, MsgType
from lerobot_policy_remote.wire.messages import EventMsg, FeatureSpec, SessionOpen


@pytest.fixture(scope="module")
def server(router, act_rel_ckpt):
    from lerobot_policy_remote.server.service import PolicyServer

    s = PolicyServer(
        make_manifest(router, act_rel_ckpt, max_sessions=8, action_feature_names=list(SIM_ARM_ACTION_NAMES)),
        progress=lambda t: None,
    ).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def reference(act_rel_ckpt):
    """The same checkpoint run locally through lerobot: what a robot's chunk must equal."""
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors

    cfg = PreTrainedConfig.from_pretrained(act_rel_ckpt)
    policy = get_policy_class(cfg.type).from_pretrained(act_rel_ckpt, config=cfg).eval()
    pre, post = make_pre_post_processors(cfg, pretrained_path=str(act_rel_ckpt))

    def run(state: np.ndarray, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        batch = {
            "observation.state": torch.tensor(state, dtype=torch.float32)[None],
            "observation.images.front": torch.from_numpy(image.copy()).permute(2, 0, 1).float()[None] / 255.0,
            "task": [""],
            "robot_type": "",
        }
        with torch.inference_mode():
            chunk = policy.predict_action_chunk(pre(batch))
            return chunk[0].numpy().copy(), post(chunk)[0].numpy().copy()

    return run


def wait_idle(server, timeout: float = 15.0) -> None:
    """Sessions of earlier tests are collected once their robots' tokens are gone (grace 1 s)."""
    import time

    deadline = time.monotonic() + timeout
    while server.registry.count() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.registry.count() == 0, "earlier sessions were not collected after their robots left"


@pytest.fixture(autouse=True)
def _idle(server):
    wait_idle(server)


def errors_counted(server: PolicyServer, reason: str) -> float:
    """The server's `errors_total{reason}` as its metrics registry reports it (0 before the first)."""
    return server.metrics.registry.get_sample_value(PREFIX + "errors_total", {"reason": reason}) or 0.0


def new_robot(zenoh_client, server, name="r") -> FakeRobot:
    return FakeRobot(zenoh_client(), server.keys, f"{name}-{uuid.uuid4().hex[:8]}")


def test_status_reports_capabilities_and_metrics_url(server, zenoh_client):
    r = new_robot(zenoh_client, server)
    [st] = r.statuses()
    assert st.replica == server.replica and st.warmed_up and not st.draining
    assert st.model.policy_type == "act" and len(st.model.fingerprint) == 64
    assert st.serving_mode == "shared" and st.max_sessions == 8
    assert (
        st.action_names == SIM_ARM_ACTION_NAMES
        and st.image_features == ["observation.images.front"]
        and st.state_dim == 6
    )
    assert st.metrics_url == f"http://127.0.0.1:{server.health_port}/metrics"


@pytest.mark.parametrize(
    "kwargs, code, words",
    [
        (dict(action_names=list(reversed(SIM_ARM_ACTION_NAMES))), "action_mismatch", "Action name/order mismatch"),
        (dict(action_names=SIM_ARM_ACTION_NAMES[:5]), "action_mismatch", "Action name/order mismatch"),
        (
            dict(
                features=[
                    FeatureSpec("observation.state", "state", [6]),
                    FeatureSpec("observation.images.wrist", "image", [96, 128, 3]),
                ]
            ),
            "camera_mismatch",
            "observation.images.front",
        ),
        (dict(features=default_features(state_dim=7)), "state_dim_mismatch", "size 6"),
        (dict(schema_min=2, schema_max=3), "schema_mismatch", "schema"),
        (dict(expect_fingerprint="0" * 64), "model_mismatch", "different checkpoint"),
        (dict(policy_type="pi0"), "model_mismatch", "pi0"),
    ],
)
def test_capability_matrix_rejections(server, zenoh_client, kwargs, code, words):
    ack = new_robot(zenoh_client, server).open(server.replica, **kwargs)
    assert not ack.ok and ack.code == code and words in ack.message, ack


def test_capability_matrix_accepts_with_warnings(server, zenoh_client):
    r = new_robot(zenoh_client, server)
    feats = [
        FeatureSpec("observation.state", "state", [6]),
        FeatureSpec("observation.images.front", "image", [480, 480, 3]),
    ]
    ack = r.open(server.replica, features=feats, rtc=True, fps=15.0, expect_fingerprint=server.caps.fingerprint)
    assert ack.ok and ack.session_id and ack.action_names == SIM_ARM_ACTION_NAMES
    assert not ack.rtc_active and not ack.supports_rtc  # RTC downgraded: said by the ack's fields, not a warning
    assert not any("RTC" in w for w in ack.warnings), ack.warnings
    assert any("aspect ratio" in w for w in ack.warnings) and any("15 fps" in w for w in ack.warnings)
    # Any resolution is accepted: the server resizes canonically.
    chunk = r.request(np.zeros(6), image=np.full((480, 480, 3), 50, np.uint8))
    assert chunk.chunk_robot.shape == (20, 6)


def test_eight_sessions_get_chunks_from_their_own_observations(server, zenoh_client, reference):
    """Relative-action pipeline: each chunk equals the local reference for THAT robot's state and image."""
    rng = np.random.default_rng(1)
    robots = [new_robot(zenoh_client, server, f"fleet{i}") for i in range(8)]
    for r in robots:
        assert r.open(server.replica).ok
    states = [rng.uniform(-80, 80, 6).astype(np.float32) for _ in robots]
    images = [rng.integers(0, 255, (96, 128, 3), dtype=np.uint8) for _ in robots]
    results: dict[int, list[ActionChunkMsg]] = {i: [] for i in range(8)}

    def run(i: int) -> None:
        for _ in range(3):
            results[i].append(robots[i].request(states[i], image=images[i], quality=0, timeout=60))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i in range(8):
        want_model, want_robot = reference(states[i], images[i])
        assert len(results[i]) == 3
        for chunk in results[i]:
            np.testing.assert_allclose(chunk.chunk_model, want_model, rtol=1e-4, atol=1e-3)
            np.testing.assert_allclose(chunk.chunk_robot, want_robot, rtol=1e-4, atol=1e-3)
    # The anchor really is each robot's own state: (robot - model-space unnormalized) differs by the state offset.
    a, b = results[0][0], results[1][0]
    assert not np.allclose(a.chunk_robot, b.chunk_robot)


def test_newest_wins_with_superseded_count(server, zenoh_client):
    r = new_robot(zenoh_client, server)
    assert r.open(server.replica).ok
    last = r.send_burst([np.full(6, float(i)) for i in range(10)])  # all but the newest few are superseded
    _, chunk = r.wait_for(lambda h, b: isinstance(b, ActionChunkMsg) and h.seq_id == last, 30)
    total = chunk.superseded_seqs
    while not r.inbox.empty():
        h, b = r.recv(1)
        total += getattr(b, "superseded_seqs", 0)
    assert total >= 1
    [st] = [s for s in r.statuses() if s.replica == server.replica]
    info = next(s for s in st.sessions if s.client_uuid == r.uuid)
    assert info.superseded >= 1 and info.requests < 10


def test_reset_is_acked_and_episode_echoed(server, zenoh_client):
    r = new_robot(zenoh_client, server)
    assert r.open(server.replica).ok
    ack = r.reset(3)
    assert ack.ok and ack.episode_id == 3
    seq = r.send(np.zeros(6), episode_start=True)
    h, body = r.wait_for(lambda h, b: h.seq_id == seq, 30)
    assert isinstance(body, ActionChunkMsg) and h.episode_id == 3
    bad = FakeRobot(r.z, server.keys, r.uuid)
    bad.replica, bad.ack = server.replica, type(r.ack)(ok=True, session_id="nope")
    assert not bad.reset(1).ok


def test_unknown_session_gets_rehandshake_event(server, zenoh_client):
    r = new_robot(zenoh_client, server)
    r.replica = server.replica
    r.send(np.zeros(6))
    _, body = r.wait_for(lambda h, b: isinstance(b, EventMsg), 10)
    assert body.event == "unknown_session" and "re-handshake" in body.message


def test_hostile_input_is_refused_and_others_keep_serving(server, zenoh_client):
    victim, fuzzer = new_robot(zenoh_client, server, "good"), new_robot(zenoh_client, server, "fuzz")
    assert victim.open(server.replica).ok and fuzzer.open(server.replica).ok
    good_header = lambda seq: Header(1, MsgType.OBS, seq, 0, 0, 1).pack()  # noqa: E731
    cases = [
        (b"\x00garbage\xff" * 10, good_header(1), "malformed"),
        (encode(SessionOpen("x", [])), good_header(2), "bad_observation"),
        (b"\x80", b"short", "bad_header"),
        (b"\x80", Header(9, MsgType.OBS, 3, 0, 0, 1).pack(), "schema_mismatch"),
    ]
    for payload, att, _ in cases:
        fuzzer.send_raw(payload, att)
        _, ev = fuzzer.wait_for(lambda h, b: isinstance(b, EventMsg), 20)
        assert ev.event == "bad_request" and ev.message
    # NaN state and wrong state size are caught before the model.
    fuzzer.send(np.array([np.nan] * 6))
    _, ev = fuzzer.wait_for(lambda h, b: isinstance(b, EventMsg), 20)
    assert ev.event == "bad_request" and "state" in ev.message
    fuzzer.send(np.zeros(9))
    _, ev = fuzzer.wait_for(lambda h, b: isinstance(b, EventMsg), 20)
    assert "expected 6 values" in ev.message
    # A flood of garbage from one client while the well-behaved one keeps getting chunks.
    stop = threading.Event()

    def flood() -> None:
        rng = np.random.default_rng(0)
        while not stop.is_set():
            fuzzer.send_raw(rng.bytes(int(rng.integers(1, 5000))), good_header(99))

    t = threading.Thread(target=flood)
    t.start()
    try:
        for _ in range(5):
            chunk = victim.request(np.ones(6), timeout=30)
            assert chunk.chunk_robot.shape == (20, 6) and np.isfinite(chunk.chunk_robot).all()
    finally:
        stop.set()
        t.join()
    assert victim.inbox.qsize() == 0 or all(not isinstance(b, EventMsg) for _, b in list(victim.inbox.queue))
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.health_port}/metrics", timeout=5).read().decode()
    assert 'errors_total{reason="non_finite"}' in text and 'errors_total{reason="bad_header"}' in text


def test_metrics_parse_and_health(server, zenoh_client):
    from prometheus_client.parser import text_string_to_metric_families

    r = new_robot(zenoh_client, server)
    assert r.open(server.replica).ok
    r.request(np.zeros(6))
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.health_port}/metrics", timeout=5).read().decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    p = "lerobot_policy_server_"
    for name in ("requests", "errors", "superseded", "dropped_unknown_client", "sessions_opened", "sessions_closed"):
        assert p + name in fams, name
    for name in ("active_sessions", "server_load", "queue_wait_seconds", "inference_seconds"):
        assert p + name in fams, name
    assert fams[p + "inference_seconds"].type == "histogram"
    reqs = {s.labels.get("client"): s.value for s in fams[p + "requests"].samples if s.name.endswith("_total")}
    assert reqs.get(r.uuid) == 1.0
    assert fams[p + "active_sessions"].samples[0].value >= 1
    body = urllib.request.urlopen(f"http://127.0.0.1:{server.health_port}/healthz", timeout=5).read()
    assert body.strip() == b"ok"


def test_corrupt_jpeg_is_refused_counted_and_the_next_observation_served(server, zenoh_client):
    """A JPEG whose header is right but whose scan is garbage: decoded off the worker, refused to that robot,
    counted; the same robot and another keep getting chunks."""
    from lerobot_policy_remote.wire.data import ObservationMsg, encode_observation

    bad_robot, other = new_robot(zenoh_client, server, "badjpeg"), new_robot(zenoh_client, server, "other")
    assert bad_robot.open(server.replica).ok and other.open(server.replica).ok
    img = np.random.default_rng(5).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    payload = bytearray(
        encode_observation(
            ObservationMsg({"observation.state": np.zeros(6, np.float32)}, {"observation.images.front": img})
        )
    )
    start = payload.index(b"\xff\xd8")
    payload[start + 700 : start + 1400] = b"\xff" * 700
    before = errors_counted(server, "malformed")
    bad_robot.send_raw(bytes(payload), Header(1, MsgType.OBS, 50, 0, 0, 1).pack())
    _, ev = bad_robot.wait_for(lambda h, b: isinstance(b, EventMsg), 20)
    assert ev.event == "bad_request" and "JPEG" in ev.message
    assert errors_counted(server, "malformed") == before + 1  # counted once, as a malformed observation
    assert other.request(np.ones(6), timeout=30).chunk_robot.shape == (20, 6)
    assert bad_robot.request(np.ones(6), timeout=30).chunk_robot.shape == (20, 6)
