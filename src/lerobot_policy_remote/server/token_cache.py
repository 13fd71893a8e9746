"""One session's memo of lerobot's task tokenization: a robot sends the same task string on every observation, so
its tokenizer ran the same text through the same tokenizer on every pass (about a third of a VLA robot's
preprocessing time outside the model).

The memo sits inside lerobot's own `TokenizerProcessorStep` (its `_tokenize_text`, a pure function of the text for
the step's fixed tokenizer and settings), so the step's own code still finds the task, moves the tokens to the
device, casts the mask and handles subtasks; only the tokenizer call is skipped for a text it already tokenized.
Keyed by the exact text: a new task string is a miss and gets its own tokens. A session reset clears it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Tokenize = Callable[[str | list[str]], Any]

# Texts remembered per session: a robot switches between a few tasks; a policy that writes its state into the prompt
# (pi0.5, pi0-FAST) makes every text new, and the oldest entries go first so the memo never grows past this.
MAX_TEXTS = 8


class TokenCache:
    """Text -> the step's own tokenization of it; each hit hands out fresh copies, so nothing downstream can change
    what a later pass reads."""

    def __init__(self, tokenize: Tokenize, max_texts: int = MAX_TEXTS) -> None:
        self._tokenize = tokenize
        self._max = max_texts
        self._memo: dict[tuple[str, ...], dict[str, Any]] = {}
        self.hits = self.misses = 0

    def __call__(self, text: str | list[str]) -> dict[str, Any]:
        key = (text,) if isinstance(text, str) else tuple(text)
        out = self._memo.get(key)
        if out is None:
            self.misses += 1
            out = dict(self._tokenize(text))
            while len(self._memo) >= self._max:
                del self._memo[next(iter(self._memo))]
            self._memo[key] = out
        else:
            self.hits += 1
        return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in out.items()}

    def clear(self) -> None:
        self._memo.clear()

    def __len__(self) -> int:
        return len(self._memo)


def install(pipeline: Any) -> list[TokenCache]:
    """Give each of this (session's own) pipeline's tokenizer steps a memo; returns them (to clear on reset)."""
    from lerobot.processor import TokenizerProcessorStep

    caches = []
    for step in getattr(pipeline, "steps", []):
        if isinstance(step, TokenizerProcessorStep) and "_tokenize_text" not in vars(step):
            cache = TokenCache(step._tokenize_text)
            step._tokenize_text = cache  # instance attribute: this session's step only, lerobot's class untouched
            caches.append(cache)
    return caches
