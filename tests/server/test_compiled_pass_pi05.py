"""The compiled pass of a tiny pi0.5 (`model.compile=on`, one graph for three robots) against the eager pass: the
same chunk for one robot and two (both padded), RTC on and off; the padding rows never reach a real row. Three, as
pi0's larger bucket: run after pi0's file, two of pi0.5's three graphs come from its cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from compiled_pairs import check_parity, checkpoint, compiled_pair, requests, served

from lerobot_policy_remote.server.backend import LerobotBackend

# the bucket compiles for about a minute on a 2-core CPU; a cold cache on a busy box takes several
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[LerobotBackend, LerobotBackend]:
    return compiled_pair(checkpoint("pi05", tmp_path_factory.mktemp("pi05")), [3])


@pytest.mark.parametrize("rtc", [False, True], ids=["plain", "rtc"])
def test_the_compiled_chunk_equals_the_eager_chunk_alone_and_in_a_padded_bucket(pair, rtc):
    check_parity(*pair, rtc)


def test_padding_rows_never_reach_a_real_row(pair):
    """One robot padded to a bucket gives the same chunk whatever the other rows hold (pi0.5: bucket 3)."""
    eager, compiled = pair
    alone = served(compiled, requests(eager, False, 1, seed=40), 3)[0][0]
    sampler = compiled.sampler
    assert sampler is not None
    pad = sampler._pad_rows  # noqa: SLF001

    def garbage_rows(value, rows):  # the padding rows hold noise, not copies of the first row
        padded = pad(value, rows)
        if isinstance(padded, torch.Tensor) and padded.is_floating_point() and padded.shape[0] == rows > 1:
            padded = padded.clone()
            padded[1:] = torch.randn_like(padded[1:]) * 50
        return padded

    sampler._pad_rows = garbage_rows  # noqa: SLF001
    try:
        noisy = served(compiled, requests(eager, False, 1, seed=40), 3)[0][0]
    finally:
        del sampler._pad_rows  # noqa: SLF001
    np.testing.assert_array_equal(noisy, alone)
