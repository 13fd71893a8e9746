"""Scrape each server's advertised `/metrics` (Prometheus text) with httpx, off the UI thread."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ..store import METRIC_PREFIX


def parse_metrics(text: str, prefix: str = METRIC_PREFIX) -> dict[str, float]:
    """Sum every sample of our metrics over its label sets: name (without prefix) -> value.

    Histogram buckets and `_created` timestamps are skipped; `_count`/`_sum` are kept.
    """
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if not name.startswith(prefix) or name.endswith(("_bucket", "_created")):
                continue
            short = name[len(prefix) :]
            out[short] = out.get(short, 0.0) + float(sample.value)
    return out


def scrape(client: object, url: str) -> tuple[dict[str, float] | None, str]:
    """One scrape: (values, "") or (None, reason). `client` is an httpx.Client."""
    try:
        resp = client.get(url)  # type: ignore[attr-defined]
        resp.raise_for_status()
        return parse_metrics(resp.text), ""
    except Exception as exc:  # connection refused, timeout, HTTP error, bad text: all shown, never raised
        return None, f"{url}: {type(exc).__name__}: {exc}"[:200]
