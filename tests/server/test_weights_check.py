"""A checkpoint whose weights do not fit the model is refused at startup, in one line naming the tensors.

lerobot 0.6.1 loads leniently (strict=False for ACT, diffusion and SmolVLA; pi0 / pi0.5 print a warning and
keep random weights), so these checkpoints would otherwise be served. Each family's tiny checkpoint is
rewritten with one tensor removed, one added, or one reshaped.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file, save_model

from lerobot_policy_remote.server.capabilities import StartupRefusal
from lerobot_policy_remote.server.weights import as_loaded, check_weights, compare, file_shapes, load_error_refusal
from lerobot_policy_remote.testing.policies import save_tiny_act, save_tiny_diffusion
from lerobot_policy_remote.testing.procs import VENV_BIN, run

try:
    from lerobot_policy_remote.testing import tiny_pi, vla
except ImportError:  # the VLA extra is not installed: only the small families are checked
    tiny_pi = vla = None

FAMILIES = ["act", "diffusion"] + (["smolvla", "pi0", "pi05"] if vla is not None else [])


def _save(family: str, path: Path) -> Path:
    if family == "act":
        return save_tiny_act(path)
    if family == "diffusion":
        return save_tiny_diffusion(path)
    if family in ("pi0", "pi05"):
        tiny_pi.install()  # before building or loading a pi0 / pi0.5 in this process
    return vla.SAVERS[family](path)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory):
    """family -> (checkpoint, the policy lerobot loads from it), built once per family."""
    from lerobot.configs.policies import PreTrainedConfig
    from lerobot.policies.factory import get_policy_class

    cache: dict[str, tuple[Path, object]] = {}

    def get(family: str) -> tuple[Path, object]:
        if family not in cache:
            ckpt = Path(_save(family, tmp_path_factory.mktemp(family)))
            cfg = PreTrainedConfig.from_pretrained(ckpt)
            cache[family] = ckpt, get_policy_class(cfg.type).from_pretrained(ckpt, config=cfg)
        return cache[family]

    return get


def rewritten(ckpt: Path, dest: Path, edit) -> Path:
    """A copy of the checkpoint whose model.safetensors went through `edit(tensors) -> tensors`."""
    shutil.copytree(ckpt, dest)
    tensors = load_file(ckpt / "model.safetensors")
    save_file(edit(dict(tensors)), dest / "model.safetensors")
    return dest


def victim(ckpt: Path) -> str:
    """A tensor of the file to remove or reshape (the last name with at least one dimension)."""
    shapes = file_shapes([ckpt / "model.safetensors"])
    return sorted(k for k, s in shapes.items() if s)[-1]


def refusal(policy, family: str, ckpt: Path) -> str:
    with pytest.raises(StartupRefusal) as info:
        check_weights(policy, family, [ckpt / "model.safetensors"])
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("family", FAMILIES)
def test_a_good_checkpoint_passes(family, loaded):
    ckpt, policy = loaded(family)
    check_weights(policy, family, [ckpt / "model.safetensors"])


@pytest.mark.parametrize("family", FAMILIES)
def test_a_missing_tensor_is_named(family, loaded, tmp_path):
    ckpt, policy = loaded(family)
    key = victim(ckpt)
    bad = rewritten(ckpt, tmp_path / "bad", lambda t: {k: v for k, v in t.items() if k != key})
    assert refusal(policy, family, bad) == (
        f"the checkpoint's weights do not fit this {family} model: 1 missing ({key}), 0 unexpected, "
        "0 shape mismatches: "
        "the checkpoint is incomplete or was trained with another configuration (config.json); re-export it from the "
        "training run (config.json and model.safetensors of the same pretrained_model directory)"
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unexpected_tensor_is_named(family, loaded, tmp_path):
    ckpt, policy = loaded(family)
    bad = rewritten(ckpt, tmp_path / "bad", lambda t: {**t, "model.extra_head.weight": torch.zeros(3, 4)})
    assert f"this {family} model: 0 missing, 1 unexpected (model.extra_head.weight), 0 shape mismatches: " in refusal(
        policy, family, bad
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_a_reshaped_tensor_is_named_with_both_shapes(family, loaded, tmp_path):
    ckpt, policy = loaded(family)
    key = victim(ckpt)
    shape = file_shapes([ckpt / "model.safetensors"])[key]
    grown = (shape[0] + 1, *shape[1:])
    bad = rewritten(ckpt, tmp_path / "bad", lambda t: {**t, key: torch.zeros(grown)})
    text = refusal(policy, family, bad)
    want = ", ".join(str(d) for d in shape)
    assert (
        f"0 missing, 0 unexpected, 1 shape mismatch ({key} [{', '.join(str(d) for d in grown)}] in the file, "
        f"[{want}] in the model)" in text
    )


def test_many_names_are_counted_not_listed(loaded, tmp_path):
    ckpt, policy = loaded("act")
    keys = sorted(file_shapes([ckpt / "model.safetensors"]))[:5]
    bad = rewritten(ckpt, tmp_path / "bad", lambda t: {k: v for k, v in t.items() if k not in keys})
    first = [k for k in policy.state_dict() if k in keys][:3]  # in the model's order
    assert f"5 missing ({', '.join(first)}, +2 more), 0 unexpected" in refusal(policy, "act", bad)


def test_no_weight_file_is_refused(loaded):
    """pi0 / pi0.5 return their random model when model.safetensors is absent; the normalizer stats are no weights."""
    ckpt, policy = loaded("act")
    stats = sorted(ckpt.glob("policy_*.safetensors"))
    assert stats
    with pytest.raises(
        StartupRefusal,
        match="^the checkpoint has no model.safetensors, so this act model would run "
        "randomly initialised: copy the whole pretrained_model directory",
    ):
        check_weights(policy, "act", stats)


def test_tied_weights_saved_once_are_present(tmp_path):
    """safetensors' save_model keeps one name per shared tensor; the other name is not missing."""

    class Tied(torch.nn.Module):
        def __init__(self, tie: bool) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(10, 4)
            self.head = torch.nn.Linear(4, 10, bias=False)
            if tie:
                self.head.weight = self.embed.weight

    save_model(Tied(tie=True), str(tmp_path / "model.safetensors"))
    on_disk = file_shapes([tmp_path / "model.safetensors"])
    assert len(on_disk) == 1  # one name for the two
    assert not compare(Tied(tie=True).state_dict(), on_disk)
    untied = compare(Tied(tie=False).state_dict(), on_disk)
    assert len(untied.missing) == 1 and not untied.unexpected and not untied.shapes


@pytest.mark.skipif(vla is None, reason="needs the vla extra")
@pytest.mark.parametrize("family", ["pi0", "pi05"])
def test_openpi_names_are_mapped_as_pi0_loads_them(family, loaded, tmp_path):
    """openpi exports: names without the `model.` prefix, and only lm_head (pi0 copies it into embed_tokens)."""
    ckpt, policy = loaded(family)
    embed = "model.paligemma_with_expert.paligemma.model.language_model.embed_tokens.weight"
    lm_head = "model.paligemma_with_expert.paligemma.lm_head.weight"

    def openpi(tensors: dict) -> dict:
        tensors[lm_head] = tensors.pop(embed)  # the same shape in the tiny model, as in the real one
        return {k.removeprefix("model."): v for k, v in tensors.items()}

    assert policy.state_dict()[lm_head].shape == policy.state_dict()[embed].shape
    exported = rewritten(ckpt, tmp_path / "openpi", openpi)
    assert embed in as_loaded(policy, file_shapes([exported / "model.safetensors"]))
    check_weights(policy, family, [exported / "model.safetensors"])


def test_a_family_with_its_own_loader_is_left_to_it(tmp_path):
    from lerobot.policies.act.modeling_act import ACTPolicy

    class OwnLoader(ACTPolicy):
        @classmethod
        def from_pretrained(cls, *args, **kwargs):  # a mapping this check does not know
            raise NotImplementedError

    check_weights(OwnLoader.__new__(OwnLoader), "own", [tmp_path / "no-such-file.safetensors"])  # reads nothing


def test_torchs_state_dict_error_becomes_the_same_line():
    """lerobot's lenient loader still raises on a shape mismatch (torch checks shapes even when not strict)."""
    lenient = RuntimeError(
        "Error(s) in loading state_dict for ACTPolicy:\n\tsize mismatch for model.action_head.weight: "
        "copying a param with shape torch.Size([7, 64]) from checkpoint, the shape in current model is "
        "torch.Size([6, 64])."
    )
    assert str(load_error_refusal("act", lenient)).startswith(
        "the checkpoint's weights do not fit this act model: 1 shape mismatch (model.action_head.weight [7, 64] in the "
        "file, [6, 64] in the model): the checkpoint is incomplete"
    )
    strict = RuntimeError(
        'Error(s) in loading state_dict for X:\n    Missing key(s) in state_dict: "a.w", "b.w"\n'
        '    Unexpected key(s) in state_dict: "c.w"'
    )
    assert "2 missing (a.w, b.w), 1 unexpected (c.w), 0 shape mismatches:" in str(load_error_refusal("x", strict))
    assert load_error_refusal("act", RuntimeError("CUDA out of memory")) is None
    assert load_error_refusal("act", ValueError("Error(s) in loading state_dict")) is None


@pytest.mark.parametrize("family", ["act"] + (["pi0"] if vla is not None else []))
@pytest.mark.parametrize("edit", ["missing", "reshaped"])
def test_the_backend_refuses_before_building_pipelines(family, edit, loaded, tmp_path):
    """Through LerobotBackend. ACT's load logs a missing tensor and raises on a reshaped one; pi0's prints a warning
    and returns its random weights in both cases. All four end in the line, before any pipeline is built."""
    from lerobot_policy_remote.server.backend import LerobotBackend
    from lerobot_policy_remote.server.manifest import Manifest, ModelSpec

    ckpt, _ = loaded(family)
    key = victim(ckpt)
    shape = file_shapes([ckpt / "model.safetensors"])[key]
    bad = rewritten(
        ckpt,
        tmp_path / "bad",
        (lambda t: {k: v for k, v in t.items() if k != key})
        if edit == "missing"
        else (lambda t: {**t, key: torch.zeros(shape[0] + 1, *shape[1:])}),
    )
    (bad / "policy_preprocessor.json").unlink()  # the refusal comes first: pipelines are never built
    progress: list[str] = []
    with pytest.raises(StartupRefusal, match=f"this {family} model: .*{key.replace('.', '[.]')}"):
        LerobotBackend(Manifest(model=ModelSpec(repo_or_path=str(bad)), default_task="x"), progress=progress.append)
    assert not any("processor" in p for p in progress)


@pytest.mark.slow  # a real lerobot-policy-server process
def test_the_cli_exits_2_with_one_line_naming_the_tensor(loaded, tmp_path, router):
    ckpt, _ = loaded("act")
    key = victim(ckpt)
    bad = rewritten(ckpt, tmp_path / "bad", lambda t: {k: v for k, v in t.items() if k != key})
    t0 = time.monotonic()
    status, output = run(
        [
            str(VENV_BIN / "lerobot-policy-server"),
            f"--model.repo_or_path={bad}",
            "--default_task=x",
            f"--zenoh.connect_endpoints=[{router.endpoint}]",
            "--health_port=0",
        ],
        timeout=120,
    )
    took = time.monotonic() - t0
    assert status == 2, output
    errors = [x for x in output.splitlines() if x.startswith("lerobot-policy-server: error:")]
    assert errors == [
        f"lerobot-policy-server: error: the checkpoint's weights do not fit this act model: 1 missing ({key}), "
        "0 unexpected, 0 shape mismatches: the checkpoint is incomplete or was trained with another "
        "configuration (config.json); re-export it from the training run (config.json and model.safetensors "
        "of the same pretrained_model directory)"
    ], output
    assert "Traceback" not in output and "Building processor pipelines" not in output
    assert took < 60, took
