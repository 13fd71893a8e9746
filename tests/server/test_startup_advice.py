"""`startup_errors.explain` on constructed exceptions: a package the policy's code cannot import names its pip command,
and a refusal's own line passes through as it is."""

from __future__ import annotations

import pytest

from lerobot_policy_remote.server.capabilities import StartupRefusal
from lerobot_policy_remote.server.manifest import Manifest, ModelSpec
from lerobot_policy_remote.server.startup_errors import explain

VLA_FIX = "pip install 'lerobot_policy_remote[vla]' (the SmolVLA / pi0 / pi0.5 dependencies)"


@pytest.fixture
def manifest(tmp_path) -> Manifest:
    (tmp_path / "config.json").write_text("{}")
    return Manifest(model=ModelSpec(repo_or_path=str(tmp_path)), default_task="x")


def lerobots(pkg: str, extra: str) -> ImportError:
    """What lerobot's `require_package` raises."""
    return ImportError(
        f"'{pkg}' is required but not installed. Install it with: pip install 'lerobot[{extra}]' "
        f"(or uv pip install 'lerobot[{extra}]')"
    )


@pytest.mark.parametrize("pkg, extra", [("transformers", "smolvla"), ("transformers", "pi"), ("scipy", "scipy-dep")])
def test_lerobots_required_package_names_the_vla_extra(manifest, pkg, extra):
    assert explain(lerobots(pkg, extra), manifest) == (
        f"the policy needs the Python package '{pkg}', which is not installed: {VLA_FIX}"
    )


@pytest.mark.parametrize("name", ["transformers", "transformers.models.paligemma", "num2words", "accelerate"])
def test_a_plain_missing_module_of_the_vla_extra(manifest, name):
    exc = ModuleNotFoundError(f"No module named '{name}'", name=name)
    assert explain(exc, manifest) == (
        f"the policy needs the Python package '{name.split('.')[0]}', which is not installed: {VLA_FIX}"
    )


def test_a_wrapped_import_error_is_found_through_its_cause(manifest):
    try:
        try:
            raise lerobots("transformers", "smolvla")
        except ImportError as inner:
            raise RuntimeError("could not build the policy") from inner
    except RuntimeError as outer:
        assert explain(outer, manifest).endswith(VLA_FIX)


def test_other_families_get_their_own_extra_or_package(manifest):
    assert explain(lerobots("diffusers", "groot"), manifest) == (
        "the policy needs the Python package 'diffusers', which is not installed: pip install 'lerobot[groot]'"
    )
    assert explain(ModuleNotFoundError("No module named 'flash_attn'", name="flash_attn"), manifest) == (
        "the policy needs the Python package 'flash_attn', which is not installed: pip install flash_attn (or the "
        "lerobot extra of this policy family)"
    )


def test_a_missing_module_of_lerobot_itself_is_not_an_extra(manifest):
    exc = ModuleNotFoundError("No module named 'lerobot.policies.nope'", name="lerobot.policies.nope")
    assert explain(exc, manifest).startswith(
        "startup failed: ModuleNotFoundError: No module named 'lerobot.policies.nope'"
    )


def test_an_import_error_handled_inside_a_library_is_no_cause(manifest):
    try:
        try:
            import flash_attn_not_here  # noqa: F401
        except ImportError:
            raise ValueError("bad value")  # noqa: B904 (its __context__ is the ImportError, not its cause)
    except ValueError as exc:
        assert explain(exc, manifest).startswith("startup failed: ValueError: bad value")


def test_a_refusal_passes_through_as_it_is(manifest):
    line = "the checkpoint's weights do not fit this pi0 model: 1 missing (model.action_out_proj.bias), 0 unexpected"
    try:
        raise StartupRefusal(line) from RuntimeError("Error(s) in loading state_dict for PI0Policy:\n\tsize mismatch")
    except StartupRefusal as exc:
        assert explain(exc, manifest) == line
