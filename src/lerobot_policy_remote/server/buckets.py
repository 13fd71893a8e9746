"""Batch buckets: the static batch sizes a compiled pass is built for (server/compiled.py).

Why powers of two: a pass over B robots runs at the next bucket up, so at most half a pass is padding, and a
`max_batch` of 8 needs four graphs (1, 2, 4, 8) rather than eight.
"""

from __future__ import annotations


def batch_buckets(max_batch: int, chosen: list[int] | tuple[int, ...] = ()) -> tuple[int, ...]:
    """The operator's sizes up to `max_batch` (`model.compile_buckets`), else 1, 2, 4, ... below `max_batch`; then
    `max_batch` itself (which need not be a power of two), so every pass has a bucket."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    if chosen:
        sizes = sorted({size for size in chosen if 1 <= size < max_batch})
    else:
        sizes, size = [], 1
        while size < max_batch:
            sizes.append(size)
            size *= 2
    sizes.append(max_batch)
    return tuple(sizes)


def bucket_for(rows: int, buckets: tuple[int, ...]) -> int | None:
    """The smallest bucket that holds `rows` robots; None when none does."""
    for size in buckets:
        if size >= rows:
            return size
    return None
