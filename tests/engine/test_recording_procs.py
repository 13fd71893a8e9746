"""Recording with the remote backend through the real CLI: `lerobot-rollout --strategy.type=sentry|episodic|
highlight|dagger --inference.type=remote` with the sim_arm against a real `lerobot-policy-server`.

Each test loads the dataset with lerobot's own `LeRobotDataset` and checks its episodes and frames against
the sim robot's record of every executed command (`--robot.record_path`): the recorded actions are exactly
the executed ones, each remote one from a chunk the server audited (session_id, seq_id). Keys (dagger's
pause/correction, highlight's save) come from the simulated leader's `key_script`, through the strategy's
own key path; `remote.degraded` marks only the frames of a SIGSTOP window.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from lerobot_policy_remote.testing import VENV_BIN, Proc
from lerobot_policy_remote.testing.policies import save_tiny_act
from lerobot_policy_remote.testing.procs import policy_server

pytestmark = pytest.mark.slow
FPS = 15
CAM = "{front: {height: 48, width: 64, fps: 15}}"
MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


@pytest.fixture(scope="module")
def served(router, tmp_path_factory):
    """One ACT server for the module (lease 10 s: a SIGSTOP shows as a late request, not a lost server)."""
    tmp = tmp_path_factory.mktemp("rec")
    task = f"pick {uuid.uuid4().hex[:6]}"
    model = save_tiny_act(tmp / "act", cameras={"front": (48, 64)}, chunk_size=20)
    server = policy_server(
        model,
        task,
        router.endpoint,
        "--zenoh.lease_ms=10000",
        "--warmup_inferences=1",
        name="rec-server",
        max_seconds=300,
        ready_timeout=120,
        log=tmp / "server.log",
    )
    try:
        yield model, task, server
    finally:
        server.stop()


def rollout(
    served,
    router,
    tmp: Path,
    strategy: list[str],
    *extra: str,
    video: bool = False,
    duration: float = 4,
    wait: bool = True,
) -> tuple[Proc, Path, Path]:
    model, task, _ = served
    root, cmds = tmp / "ds", tmp / "cmds.jsonl"
    argv = [
        str(VENV_BIN / "lerobot-rollout"),
        *strategy,
        "--inference.type=remote",
        "--robot.type=sim_arm",
        f"--robot.cameras={CAM}",
        f"--robot.record_path={cmds}",
        f"--policy.path={model}",
        f"--task={task}",
        f"--fps={FPS}",
        f"--duration={duration}",
        f"--inference.connect_endpoint={router.endpoint}",
        "--inference.log_every_chunk=true",  # the test reads the per-chunk lines
        "--return_to_initial_position=false",
        f"--dataset.repo_id=local/rollout_{tmp.name}",
        f"--dataset.root={root}",
        "--dataset.push_to_hub=false",
        f"--dataset.video={'true' if video else 'false'}",
        f"--dataset.single_task={task}",
        "--play_sounds=false",
        *extra,
    ]
    if not any(a.startswith("--inference.request_timeout_s=") for a in extra):
        # a request lost on a busy box costs 1.5 s, not the default 5 s (longer than these episodes)
        argv.append("--inference.request_timeout_s=1.5")
    proc = Proc(argv, name=f"rollout-{strategy[0]}", max_seconds=120, log=tmp / "rollout.log")
    if wait:
        finish(proc)
    return proc, root, cmds


def finish(proc: Proc, timeout: float = 110) -> None:
    try:
        rc = proc.popen.wait(timeout=timeout)
    finally:
        proc.stop()
    assert rc == 0, proc.output()[-4000:]


def load(root: Path, tmp: Path):
    from lerobot.datasets import LeRobotDataset

    ds = LeRobotDataset(f"local/rollout_{tmp.name}", root=root)
    cols = ds.hf_dataset.with_format("numpy")
    return ds, {k: np.asarray(cols[k]) for k in cols.column_names}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def as_rows(recs: list[dict]) -> np.ndarray:
    return np.array([[r["action"][f"{m}.pos"] for m in MOTORS] for r in recs], dtype=np.float32).reshape(-1, 6)


def audited(server: Proc) -> set[tuple[str, int]]:
    out = set()
    for line in server.output().splitlines():
        if "lerobot.policy_server.audit" in line:
            body = json.loads(line[line.index("{") :])
            out.add((body.get("session_id"), body.get("seq_id")))
    return out


def assert_remote(recs: list[dict], server: Proc) -> None:
    """Every executed action came from a server chunk: a provenance the server's audit log names."""
    seen = audited(server)
    missing = [
        (r["provenance"]["session_id"], r["provenance"]["seq_id"])
        for r in recs
        if (r["provenance"]["session_id"], r["provenance"]["seq_id"]) not in seen
    ]
    assert recs and not missing, f"{len(missing)} executed actions from unaudited chunks: {missing[:5]}"


def test_sentry_records_exactly_the_executed_actions_and_marks_only_a_stall(served, router, tmp_path):
    """sentry (video on), fallback repeat_last: a 1.5 s SIGSTOP of the server marks its frames, no others."""
    _, _, server = served
    proc, root, cmds = rollout(
        served,
        router,
        tmp_path,
        ["--strategy.type=sentry"],
        "--inference.fallback=repeat_last",
        "--inference.degraded_after_s=0.3",
        "--inference.buffer_time_s=0.5",
        "--inference.request_timeout_s=20",
        video=True,
        duration=7,
        wait=False,
    )
    proc.wait_for("Link state: STREAMING", timeout=60)
    time.sleep(1.5)  # healthy frames first (a fixed scenario step, not a wait for a condition)
    t_stop = time.monotonic()
    server.signal_program(signal.SIGSTOP)
    try:
        time.sleep(1.5)
    finally:
        t_cont = time.monotonic()
        server.signal_program(signal.SIGCONT)
    finish(proc)
    ds, cols = load(root, tmp_path)
    recs = records(cmds)
    assert ds.meta.total_episodes == 1 and ds.num_frames == len(recs) > 4 * FPS
    assert "remote.degraded" in ds.features and ds.features["observation.images.front"]["dtype"] == "video"
    np.testing.assert_array_equal(cols["action"], as_rows(recs))
    marked = cols["remote.degraded"].reshape(-1)
    t = np.array([r["t"] for r in recs])
    assert marked.any(), "the stall left no marked frame"
    assert (t[marked] >= t_stop).all() and (t[marked] <= t_cont + 1.0).all(), (t[marked] - t_stop, t_cont - t_stop)
    assert not marked[t < t_stop].any()
    assert [r["degraded"] for r in recs] == marked.tolist()
    assert_remote([r for r in recs if r["provenance"]], server)
    fallback = [r for r, m in zip(recs, marked, strict=True) if m and r["provenance"] is None]
    assert fallback, "repeat_last filled the dry queue: those frames are fallbacks, marked"


def test_episodic_two_episodes(served, router, tmp_path):
    _, _, server = served
    proc, root, cmds = rollout(
        served,
        router,
        tmp_path,
        ["--strategy.type=episodic", "--strategy.reset_to_initial_position=false"],
        "--dataset.num_episodes=2",
        "--dataset.episode_time_s=2",
        "--dataset.reset_time_s=0.5",
        duration=0,
    )
    ds, cols = load(root, tmp_path)
    recs = records(cmds)
    assert ds.meta.total_episodes == 2
    np.testing.assert_array_equal(cols["action"], as_rows(recs))
    assert not cols["remote.degraded"].any()
    assert_remote(recs, server)
    # each dataset episode is one server-side episode (the strategy resets the engine per episode)
    eps = {
        int(e): {r["provenance"]["episode_id"] for r, ei in zip(recs, cols["episode_index"], strict=True) if ei == e}
        for e in (0, 1)
    }
    assert len(eps[0]) == 1 and len(eps[1]) == 1 and eps[0] != eps[1], eps


def test_highlight_saves_the_ring_buffer_on_the_save_key(served, router, tmp_path):
    """The leader presses `s` (save: ring buffer + live) then `s` (stop): one episode, a contiguous run of the
    executed actions."""
    _, _, server = served
    proc, root, cmds = rollout(
        served,
        router,
        tmp_path,
        ["--strategy.type=highlight", "--strategy.ring_buffer_seconds=1"],
        "--teleop.type=sim_leader",
        "--teleop.key_script=2.0:s,3.0:s,3.5:esc",
        duration=0,
    )
    ds, cols = load(root, tmp_path)
    recs = records(cmds)
    rows, executed = cols["action"], as_rows(recs)
    assert ds.meta.total_episodes == 1 and FPS * 1.5 <= len(rows) < len(recs)
    starts = [i for i in range(len(executed) - len(rows) + 1) if np.array_equal(executed[i : i + len(rows)], rows)]
    assert len(starts) == 1, "the saved frames are one contiguous run of the executed actions"
    assert not cols["remote.degraded"].any()
    assert_remote(recs[starts[0] : starts[0] + len(rows)], server)


def test_dagger_corrections_are_the_leaders_actions(served, router, tmp_path):
    """record_autonomous: space pauses, tab starts a correction (the leader drives), tab ends it, space resumes, esc
    stops."""
    _, _, server = served
    lead = tmp_path / "leader.jsonl"
    proc, root, cmds = rollout(
        served,
        router,
        tmp_path,
        ["--strategy.type=dagger", "--strategy.record_autonomous=true"],
        "--teleop.type=sim_leader",
        f"--teleop.record_path={lead}",
        "--teleop.key_script=1.0:space,1.2:tab,3.5:tab,3.7:space,4.7:esc",
        duration=0,
    )
    ds, cols = load(root, tmp_path)
    recs, leader = records(cmds), records(lead)
    inter = cols["intervention"].reshape(-1)
    assert ds.meta.total_episodes == 1 and inter.any() and (~inter).any()
    idx = np.flatnonzero(inter)
    assert (np.diff(idx) == 1).all(), "one correction window"
    assert idx.size >= FPS, "over a second of correction frames (after lerobot's 1 s follower handover)"
    # the leader's first reading is lerobot's handover target (the follower slides to it, unrecorded)
    np.testing.assert_array_equal(cols["action"][inter], as_rows(leader)[-idx.size :])
    assert len(leader) == idx.size + 1
    remote = [r for r in recs if r["provenance"]]
    np.testing.assert_array_equal(cols["action"][~inter], as_rows(remote))
    assert_remote(remote, server)
    assert not cols["remote.degraded"].any()


def audit_lines(server: Proc) -> list[dict]:
    return [
        json.loads(line[line.index("{") :])
        for line in server.output().splitlines()
        if "lerobot.policy_server.audit" in line
    ]


def console_reset(router, robot: str) -> dict:
    verb = Proc(
        [str(VENV_BIN / "lerobot-fleet"), "reset", robot, f"--router={router.endpoint}", "--json"],
        name="reset",
        max_seconds=30,
    )
    try:
        assert verb.popen.wait(timeout=25) == 0, verb.output()
    finally:
        verb.stop()
    return json.loads(verb.output().strip().splitlines()[-1])


@pytest.mark.parametrize("strategy", ["episodic", "sentry"])
def test_console_reset_ends_the_dataset_episode(served, router, tmp_path, strategy):
    """`lerobot-fleet reset ROBOT` mid-episode: the episode is saved, the next one is a fresh server episode
    (the one the acknowledgement names, in the server's audit lines), the boundary is the reset."""
    _, _, server = served
    robot = f"rec-{strategy}-{uuid.uuid4().hex[:6]}"
    extra = (
        ["--strategy.type=episodic", "--strategy.reset_to_initial_position=false"]
        if strategy == "episodic"
        else ["--strategy.type=sentry"]
    )
    proc, root, cmds = rollout(
        served,
        router,
        tmp_path,
        extra,
        f"--inference.client_uuid={robot}",
        "--dataset.num_episodes=2",
        "--dataset.episode_time_s=5",
        "--dataset.reset_time_s=0.3",
        duration=0 if strategy == "episodic" else 4.5,
        wait=False,
    )
    proc.wait_for("executing session_id=", timeout=60)
    time.sleep(1.0)  # a second of episode 0 (a scenario step)
    t_reset = time.monotonic()
    ack = console_reset(router, robot)
    t_acked = time.monotonic()
    finish(proc)
    ds, cols = load(root, tmp_path)
    recs = records(cmds)
    assert ack["ok"] and ds.meta.total_episodes == 2, (ack, ds.meta.total_episodes)
    np.testing.assert_array_equal(cols["action"], as_rows(recs))
    ep = cols["episode_index"].reshape(-1)
    t = np.array([r["t"] for r in recs])
    assert (t[ep == 0] <= t_acked).all() and (t[ep == 1] >= t_reset).all(), "the dataset boundary is the reset"
    assert (ep == 0).sum() < 3 * FPS, "episode 0 ended early, at the reset (episode_time_s is 5)"
    server_eps = [
        {r["provenance"]["episode_id"] for r, e in zip(recs, ep, strict=True) if e == k and r["provenance"]}
        for k in (0, 1)
    ]
    assert server_eps[1] == {ack["episode_id"]} and len(server_eps[0]) == 1 and server_eps[0] != server_eps[1], (
        server_eps,
        ack,
    )
    session = recs[-1]["provenance"]["session_id"]
    audited_eps = {a["episode_id"] for a in audit_lines(server) if a.get("session_id") == session}
    assert server_eps[0] | server_eps[1] <= audited_eps, audited_eps
    assert_remote([r for r in recs if r["provenance"]], server)
