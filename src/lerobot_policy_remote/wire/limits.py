"""Bounds every decoder checks before it allocates anything."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WireLimits:
    """Upper bounds on what one message may claim. Defaults fit 4 cameras at 1080p raw."""

    max_payload_bytes: int = 64 * 1024 * 1024
    max_image_side: int = 4096
    max_image_pixels: int = 4096 * 4096
    max_tensor_elements: int = 4 * 1024 * 1024
    max_tensor_ndim: int = 8
    max_str_len: int = 64 * 1024
    max_items: int = 4096


DEFAULT_LIMITS = WireLimits()
