"""Shrink lerobot 0.6.1's pi0 / pi0.5 architectures to a few hundred thousand parameters, for tests only.

Why a hook and not a config: pi0 and pi0.5 accept only the `gemma_2b` / `gemma_300m` variants, whose sizes
(and PaliGemma's SigLIP vision tower and 257,152-token vocabulary) are written into lerobot's modeling code.
`install()` swaps three names in `lerobot.policies.pi0.modeling_pi0` and `...pi05.modeling_pi05`, so every
pi0 / pi0.5 this process builds afterwards has the tiny sizes below; checkpoints keep the stock config
(`gemma_2b` / `gemma_300m`, the stock keys) and load through lerobot's own `from_pretrained`. Nothing in the
product imports this module: the tests call `install()` in-process, and a subprocess (the real
`lerobot-policy-server` or `lerobot-rollout`) gets it through `SITE_DIR` on its PYTHONPATH, whose
`sitecustomize.py` calls `install()` at interpreter start. A stock-size checkpoint loaded under the hook
fails the server's weight check (shape mismatches), so the hook cannot pass for a real model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# One width for the PaliGemma language model, a narrower action expert; heads and head_dim are shared,
# as pi0's joint attention requires (gemma_2b and gemma_300m share them too).
TINY_VLM = {"width": 64, "depth": 2, "mlp_dim": 128, "num_heads": 2, "num_kv_heads": 1, "head_dim": 16}
TINY_EXPERT = {"width": 32, "depth": 2, "mlp_dim": 64, "num_heads": 2, "num_kv_heads": 1, "head_dim": 16}
TINY_VOCAB = 1024  # the tiny tokenizer's ids all fall below this (testing.vla trains it so)
TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "patch_size": 8,
}

SITE_DIR = Path(__file__).with_name("tiny_pi_site")
_installed = False


def _is_tiny(width: int) -> bool:
    return width in (TINY_VLM["width"], TINY_EXPERT["width"])


def install() -> None:
    """Make every pi0 / pi0.5 built from now on in this process tiny (idempotent)."""
    global _installed
    if _installed:
        return
    from lerobot.policies.pi0 import modeling_pi0
    from lerobot.policies.pi05 import modeling_pi05

    for module in (modeling_pi0, modeling_pi05):
        _patch(module)
    _installed = True


def _patch(module: Any) -> None:
    gemma_config = module.GemmaConfig
    vlm_class = module.PaliGemmaForConditionalGenerationWithPiGemma
    expert_class = module.PiGemmaForCausalLM

    def get_gemma_config(variant: str) -> Any:
        if variant == "gemma_2b":
            return gemma_config(**TINY_VLM)
        if variant == "gemma_300m":
            return gemma_config(**TINY_EXPERT)
        raise ValueError(f"Unknown variant: {variant}")

    class TinyPaliGemma(vlm_class):  # type: ignore[misc, valid-type]
        """PaliGemma with a one-layer vision tower and a small vocabulary (same module names, same keys)."""

        def __init__(self, config: Any) -> None:
            if _is_tiny(config.text_config.hidden_size):
                for name, value in TINY_VISION.items():
                    setattr(config.vision_config, name, value)
                config.vision_config.projection_dim = config.text_config.hidden_size
                config.text_config.vocab_size = TINY_VOCAB
                config._vocab_size = TINY_VOCAB
            super().__init__(config)

    class TinyExpert(expert_class):  # type: ignore[misc, valid-type]
        """The action expert with the small vocabulary (its embeddings are dropped by lerobot anyway)."""

        def __init__(self, config: Any) -> None:
            if _is_tiny(config.hidden_size):
                config.vocab_size = TINY_VOCAB
            super().__init__(config)

    TinyPaliGemma.__name__ = vlm_class.__name__
    TinyExpert.__name__ = expert_class.__name__
    module.get_gemma_config = get_gemma_config
    module.PaliGemmaForConditionalGenerationWithPiGemma = TinyPaliGemma
    module.PiGemmaForCausalLM = TinyExpert


def installed() -> bool:
    """Is the hook in force in this process (so a stock-size pi0 cannot be built here)?"""
    return _installed


def tiny_sizes() -> dict[str, dict[str, int]]:
    """The sizes in force under the hook (for docs and assertions)."""
    return {
        "vlm": dict(TINY_VLM),
        "expert": dict(TINY_EXPERT),
        "vision": dict(TINY_VISION),
        "vocab": {"size": TINY_VOCAB},
    }


__all__ = ["SITE_DIR", "install", "installed", "tiny_sizes"]
