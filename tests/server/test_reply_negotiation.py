"""On a real ACT server the ack names the trained image sizes and the negotiated reply; a lean
reply (robot space, float16) carries the same actions within the robot's bound, and a tight bound falls
back to exact float32."""

from __future__ import annotations

import numpy as np


def _pair(server_factory, robots, act_ckpt):
    server = server_factory(str(act_ckpt))
    old, lean = robots(server, 2)
    return server, old, lean


def test_ack_and_lean_reply_on_real_act(server_factory, robots, act_ckpt):
    _, old, lean = _pair(server_factory, robots, act_ckpt)
    ack_old = old.open()
    assert ack_old.ok and ack_old.image_sizes == {"observation.images.front": [96, 128]}
    assert (ack_old.reply_dtype, ack_old.reply_model_space) == ("float32", True)  # a robot that asks nothing: as before
    ack = lean.open(reply_dtype="float16", reply_max_error=0.05, reply_robot_only=True)
    assert ack.ok and (ack.reply_dtype, ack.reply_model_space) == ("float16", False)

    state = np.array([5.0, -20.0, 30.0, 15.0, 2.0, 20.0], np.float32)
    img = np.random.default_rng(3).integers(0, 255, (96, 128, 3), dtype=np.uint8)
    ref = old.request(state, image=img, quality=0)
    got = lean.request(state, image=img, quality=0)
    assert not np.array_equal(ref.chunk_model, ref.chunk_robot)  # both spaces for the old robot
    assert got.chunk_model is got.chunk_robot  # robot space only for the lean one
    err = float(np.abs(got.chunk_robot - ref.chunk_robot).max())
    assert 0 < err <= 0.05, err  # float16 on the wire, within the bound the robot gave
    assert np.array_equal(got.chunk_robot.astype(np.float16).astype(np.float32), got.chunk_robot)


def test_tight_bound_falls_back_to_float32(server_factory, robots, act_ckpt):
    _, old, tight = _pair(server_factory, robots, act_ckpt)
    assert old.open().ok
    assert tight.open(reply_dtype="float16", reply_max_error=1e-9, reply_robot_only=True).reply_dtype == "float16"
    state = np.array([1.0, -10.0, 20.0, 5.0, 0.0, 10.0], np.float32)
    ref, got = old.request(state, quality=0), tight.request(state, quality=0)
    assert np.array_equal(got.chunk_robot, ref.chunk_robot)  # no chunk fits 1e-9 in float16: sent float32, exact
