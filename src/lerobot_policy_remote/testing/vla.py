"""Build tiny offline SmolVLA, pi0 and pi0.5 checkpoints with lerobot 0.6.1's own classes.

Why: the VLA families load a vision-language backbone and a tokenizer from the hub by name. Here nothing is
downloaded: the tokenizer is trained on the spot with `tokenizers`, SmolVLA's backbone is a local SmolVLM
directory (config, tokenizer, processor) that the checkpoint's `vlm_model_name` points at, and pi0 / pi0.5
are shrunk by `testing.tiny_pi` (call `tiny_pi.install()` first, in this process and in every subprocess
that loads them: `tiny_pi.SITE_DIR` on PYTHONPATH). Weights are random; the checkpoints are saved exactly as
a training run saves them (config.json, model.safetensors, the processor pipelines).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from lerobot_policy_remote.server.placement import built_on
from lerobot_policy_remote.testing.policies import _features, make_dataset_stats
from lerobot_policy_remote.testing.tiny_pi import TINY_VOCAB
from lerobot_policy_remote.wire.data import ObservationMsg, decode_observation, encode_observation

# Special tokens the SmolVLM processor and the PaliGemma prompt format look up by name.
_SPECIAL = [
    "<pad>",
    "<unk>",
    "<bos>",
    "<eos>",
    "<image>",
    "<fake_token_around_image>",
    "<global-img>",
    "<end_of_utterance>",
    "<video>",
]
_CORPUS = [
    "pick up the cube",
    "pick the red cube and place it in the bowl",
    "fold the towel",
    "open the drawer",
    "stack the blocks",
    "push the t to the target",
    "Task: State: Action: ;",
    "move the arm to the left",
] + [" ".join(str(n) for n in range(i, i + 16)) for i in range(0, 256, 16)]
VLA_CAMERA = "front"


def save_tokenizer(path: str | Path, vocab_size: int = 512) -> Path:
    """Train a small byte-level BPE tokenizer offline and save it as a transformers fast tokenizer."""
    # tokenizers ships .pyi stubs but no py.typed marker: untyped to mypy
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # type: ignore[import-untyped]
    from transformers import PreTrainedTokenizerFast

    assert vocab_size <= TINY_VOCAB, "tiny pi0 embeds at most TINY_VOCAB token ids"
    path = Path(path)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=_SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # transformers leaves its __init__ unannotated
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
        extra_special_tokens={
            "image_token": "<image>",
            "fake_image_token": "<fake_token_around_image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
    )
    fast.model_max_length = 512
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    return path


# SmolVLM2-500M's architecture (SmolLM2-360M text model, SigLIP-base/16 vision tower at 512 px, pixel shuffle 4),
# the backbone stock SmolVLA names (`HuggingFaceTB/SmolVLM2-500M-Video-Instruct`), written offline.
SMOLVLM_500M_TEXT = {
    "hidden_size": 960,
    "intermediate_size": 2560,
    "num_hidden_layers": 32,
    "num_attention_heads": 15,
    "num_key_value_heads": 5,
    "head_dim": 64,
    "vocab_size": 49280,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
}
SMOLVLM_500M_VISION = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "patch_size": 16,
}
SMOLVLM_500M_SCALE = 4
STOCK_SMOLVLA_IMAGE = 512  # stock SmolVLA's resize_imgs_with_padding


def save_tiny_smolvlm(path: str | Path, image_size: int = 64) -> Path:
    """A SmolVLM backbone directory (config, tokenizer, processor) small enough for a CPU test."""
    text = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 512,
    }
    vision = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "patch_size": 16,
    }
    return _save_smolvlm(path, text, vision, scale_factor=2, image_size=image_size)


def save_stock_smolvlm(path: str | Path) -> Path:
    """A SmolVLM backbone directory with SmolVLM2-500M's sizes (random weights when SmolVLA builds it): a GPU box."""
    return _save_smolvlm(
        path,
        SMOLVLM_500M_TEXT,
        SMOLVLM_500M_VISION,
        scale_factor=SMOLVLM_500M_SCALE,
        image_size=STOCK_SMOLVLA_IMAGE,
    )


def _save_smolvlm(
    path: str | Path, text: dict[str, Any], vision: dict[str, Any], *, scale_factor: int, image_size: int
) -> Path:
    """Config, the offline tokenizer and an unsplit-image processor whose image token count matches the config."""
    from transformers import AutoTokenizer, SmolVLMConfig
    from transformers.models.smolvlm import SmolVLMImageProcessor, SmolVLMProcessor
    from transformers.models.smolvlm.video_processing_smolvlm import SmolVLMVideoProcessor

    path = Path(path)
    save_tokenizer(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    text = {
        "model_type": "llama",
        "vocab_size": len(tokenizer),
        "rms_norm_eps": 1e-5,
        "pad_token_id": tokenizer.pad_token_id,
    } | text
    # transformers builds the config's __init__ with huggingface_hub's @strict, which mypy does not see
    config = SmolVLMConfig(  # type: ignore[call-arg]
        text_config=text,
        vision_config=vision | {"image_size": image_size},
        scale_factor=scale_factor,
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    config.save_pretrained(path)
    size = {"longest_edge": image_size}
    patches = image_size // vision["patch_size"]
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(size=size, max_image_size=size, do_image_splitting=False),
        tokenizer=tokenizer,
        video_processor=SmolVLMVideoProcessor(),
        image_seq_len=patches**2 // scale_factor**2,
    )
    processor.save_pretrained(path)
    return path


def _stats(state_dim: int, action_dim: int, cameras: dict[str, tuple[int, int]]) -> dict[str, dict[str, torch.Tensor]]:
    """The ACT kit's statistics plus the 1st / 99th percentiles pi0.5's quantile normalization reads."""
    stats = make_dataset_stats(state_dim, action_dim, cameras)
    for entry in stats.values():
        entry["q01"], entry["q99"] = entry["min"] * 0.9, entry["max"] * 0.9
    return stats


def _camera(size: int) -> dict[str, tuple[int, int]]:
    return {VLA_CAMERA: (size, size)}


def save_tiny_smolvla(
    path: str | Path,
    *,
    state_dim: int = 6,
    action_dim: int = 6,
    chunk_size: int = 30,
    num_steps: int = 3,
    image_size: int = 64,
    seed: int = 0,
) -> Path:
    """A random-weight SmolVLA checkpoint whose backbone lives in `<path>/vlm` (no hub access at load time)."""
    path = Path(path)
    vlm = save_tiny_smolvlm(path / "vlm", image_size)
    return _save_smolvla(
        path,
        vlm,
        state_dim=state_dim,
        action_dim=action_dim,
        image_size=image_size,
        seed=seed,
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        num_steps=num_steps,
        num_vlm_layers=2,
        resize_imgs_with_padding=(image_size, image_size),
        tokenizer_max_length=16,
        max_state_dim=8,
        max_action_dim=8,
    )


def save_stock_smolvla(
    path: str | Path, *, state_dim: int = 6, action_dim: int = 6, device: str = "cpu", seed: int = 0
) -> Path:
    """Stock SmolVLA (SmolVLM2-500M's first 16 layers, its action expert, 512 px, chunk 50, 10 flow steps) with
    random weights, its backbone in `<path>/vlm`: about 450 M parameters, a GPU box's model. `device` is written
    into the config, so the server loads it there."""
    path = Path(path)
    vlm = save_stock_smolvlm(path / "vlm")
    return _save_smolvla(
        path,
        vlm,
        state_dim=state_dim,
        action_dim=action_dim,
        image_size=STOCK_SMOLVLA_IMAGE,
        seed=seed,
        stock=True,
        device=device,
    )


def _save_smolvla(
    path: Path,
    vlm: Path,
    *,
    state_dim: int,
    action_dim: int,
    image_size: int,
    seed: int,
    stock: bool = False,
    device: str = "cpu",
    **overrides: Any,
) -> Path:
    """Build SmolVLA from config over the local backbone and save it as a training run does."""
    from lerobot.policies.factory import make_pre_post_processors
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig
    from lerobot.policies.smolvla.modeling_smolvla import SmolVLAPolicy

    cameras = _camera(image_size)
    inputs, outputs = _features(state_dim, action_dim, cameras)
    config = SmolVLAConfig(
        device="cpu",  # built and saved on the CPU; the saved config names `device`
        input_features=inputs,
        output_features=outputs,
        vlm_model_name=str(vlm.resolve()),
        load_vlm_weights=False,
        push_to_hub=False,
        **overrides,
    )
    torch.manual_seed(seed)
    with built_on(torch, "cuda" if stock else "cpu"):  # a stock size initialises in moments on a GPU, if one is here
        policy = SmolVLAPolicy(config)
    policy.eval()
    stats = _stats(state_dim, action_dim, cameras)
    path.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(path)
    config.device = device
    config.save_pretrained(path)
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    pre.save_pretrained(path)
    post.save_pretrained(path)
    return path


@contextlib.contextmanager
def _tokenizer_from(local: Path) -> Iterator[None]:
    """While lerobot's pi factories build their pipelines, their hub tokenizer name resolves to `local`."""
    from lerobot.processor import tokenizer_processor
    from transformers import AutoTokenizer

    class _Local:
        @staticmethod
        def from_pretrained(_name: str, *args: Any, **kwargs: Any) -> Any:
            return AutoTokenizer.from_pretrained(local)

    real = tokenizer_processor.AutoTokenizer
    tokenizer_processor.AutoTokenizer = _Local
    try:
        yield
    finally:
        tokenizer_processor.AutoTokenizer = real


def save_pi(
    kind: str,
    path: str | Path,
    *,
    state_dim: int = 6,
    action_dim: int = 6,
    chunk_size: int = 30,
    num_steps: int = 3,
    image_size: int = 32,
    cameras: list[str] | None = None,
    tiny: bool = True,
    dtype: str = "float32",
    seed: int = 0,
) -> Path:
    """A random-weight pi0 / pi0.5 ("pi0" | "pi05") checkpoint with the stock config and lerobot's own pipelines.

    `tiny` (the default) builds it under `testing.tiny_pi`'s hook; `tiny=False` builds the stock gemma_2b +
    gemma_300m (about 4 B parameters: a GPU box), which the hook must not be installed for. `dtype` is the
    config's: "bfloat16" is what a GPU serves the stock size in.
    """
    from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    from lerobot.processor.tokenizer_processor import TokenizerProcessorStep

    from lerobot_policy_remote.testing import tiny_pi

    if tiny:
        tiny_pi.install()
    elif tiny_pi.installed():
        raise RuntimeError("the tiny pi0 hook is installed in this process: a stock-size pi0 cannot be built here")
    path = Path(path)
    tokenizer_dir = save_tokenizer(path / "tokenizer")
    views = {name: (image_size, image_size) for name in (cameras or [VLA_CAMERA])}
    inputs, outputs = _features(state_dim, action_dim, views)
    if kind == "pi0":
        from lerobot.policies.pi0.configuration_pi0 import PI0Config as Config
    else:
        from lerobot.policies.pi05.configuration_pi05 import PI05Config as Config
    padded = {"max_state_dim": max(8, state_dim), "max_action_dim": max(8, action_dim)} if tiny else {}
    config = Config(
        device="cpu",
        input_features=inputs,
        output_features=outputs,
        chunk_size=chunk_size,
        n_action_steps=chunk_size,
        num_inference_steps=num_steps,
        image_resolution=(image_size, image_size),
        tokenizer_max_length=24 if tiny else 48,
        dtype=dtype,
        push_to_hub=False,
        **padded,
    )
    torch.manual_seed(seed)
    with built_on(torch, "cpu" if tiny else "cuda"):  # the stock size initialises in moments on a GPU, if one is here
        policy = get_policy_class(kind)(config)
    policy.eval()
    stats = _stats(state_dim, action_dim, views)
    path.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(path)
    with _tokenizer_from(tokenizer_dir):
        pre, post = make_pre_post_processors(config, dataset_stats=stats)
    for step in pre.steps:  # the saved pipeline names the local tokenizer, so loading it needs no hub
        if isinstance(step, TokenizerProcessorStep):
            step.tokenizer_name = str(tokenizer_dir.resolve())
    pre.save_pretrained(path)
    post.save_pretrained(path)
    return path


def save_tiny_pi0(
    path: str | Path,
    *,
    state_dim: int = 6,
    action_dim: int = 6,
    chunk_size: int = 30,
    num_steps: int = 3,
    image_size: int = 32,
    seed: int = 0,
) -> Path:
    """A random-weight pi0 checkpoint with the stock config and tiny sizes (`testing.tiny_pi`)."""
    return save_pi(
        "pi0",
        path,
        state_dim=state_dim,
        action_dim=action_dim,
        chunk_size=chunk_size,
        num_steps=num_steps,
        image_size=image_size,
        seed=seed,
    )


def save_tiny_pi05(
    path: str | Path,
    *,
    state_dim: int = 6,
    action_dim: int = 6,
    chunk_size: int = 30,
    num_steps: int = 3,
    image_size: int = 32,
    seed: int = 0,
) -> Path:
    """A random-weight pi0.5 checkpoint with the stock config and tiny sizes (`testing.tiny_pi`)."""
    return save_pi(
        "pi05",
        path,
        state_dim=state_dim,
        action_dim=action_dim,
        chunk_size=chunk_size,
        num_steps=num_steps,
        image_size=image_size,
        seed=seed,
    )


SAVERS = {"smolvla": save_tiny_smolvla, "pi0": save_tiny_pi0, "pi05": save_tiny_pi05}


def wire_observation(backend: Any, seed: int, task: str = "pick up the cube") -> ObservationMsg:
    """A camera frame at the backend's trained size and a joint state, through the wire codec (what a server decodes
    from a robot): the VLA tests' observation."""
    rng = np.random.default_rng(seed)
    (_, h, w) = backend.caps.image_shapes[f"observation.images.{VLA_CAMERA}"]
    msg = ObservationMsg(
        state={"observation.state": rng.normal(0, 20, backend.caps.state_dim).astype(np.float32)},
        images={f"observation.images.{VLA_CAMERA}": rng.integers(0, 255, (h, w, 3), dtype=np.uint8)},
        task=task,
    )
    return decode_observation(encode_observation(msg, 0))


def with_prefix(obs: ObservationMsg, prefix: NDArray[Any], delay: int) -> ObservationMsg:
    """The observation carrying an RTC prefix (model space) and its inference delay, as a robot with RTC sends it."""
    obs.prefix_model, obs.inference_delay_steps = prefix.astype(np.float32), delay
    return obs
