"""Scrape each server's advertised `/metrics` (Prometheus text) with httpx, off the UI thread."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from ..store import METRIC_PREFIX


def parse_metrics(text: str, prefix: str = METRIC_PREFIX) -> dict[str, float]:
    """Sum every sample of our metrics over its label sets: name (without prefix) -> value.

    Histogram buckets and `_created` timestamps are skipped; `_count`/`_sum` are kept. Read line by line, our own
    series only: prometheus_client's parser took 12 ms per replica with 340 robots' labelled series, on the console's
    process at every scrape (its 1 Hz refresh waited behind it). Any line this cannot read hands the whole text to
    that parser, so odd text is read as before.
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue  # comments, blank lines, other exporters' series
        try:
            brace = line.find("{")
            if brace >= 0:
                name, tail = line[:brace], line[line.rindex("}") + 1 :].split()  # a label value may hold "}" or spaces
            else:
                name, _, rest = line.partition(" ")
                tail = rest.split()
            if not 1 <= len(tail) <= 2:  # value [timestamp]
                raise ValueError(line)
            value = float(tail[0])
        except ValueError:
            return _parse_with_library(text, prefix)
        if name.endswith(("_bucket", "_created")):
            continue
        short = name[len(prefix) :]
        out[short] = out.get(short, 0.0) + value
    return out


def _parse_with_library(text: str, prefix: str) -> dict[str, float]:
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
