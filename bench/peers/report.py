"""Tables (markdown) and plots (PNG) from a results.json: `python -m bench.peers.report DIR [--img DIR]`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _spread(row: dict[str, Any], key: str) -> str:
    lo, hi = row[key + "_spread"]
    return f"{row[key]:.1f} ({lo:.1f}-{hi:.1f})" if hi - lo > 0.05 else f"{row[key]:.1f}"


def latency_table(rows: list[dict[str, Any]]) -> str:
    out = [
        (
            "| arm | S ms | round trip - S p50 ms | p99 ms | up kB/req | down kB/reply | client CPU ms/req "
            "| server CPU ms/req | req/s | errors | re-sends |"
        ),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lo50, hi50 = (x - r["sleep_ms"] for x in r["rtt_p50_ms_spread"])
        lo99, hi99 = (x - r["sleep_ms"] for x in r["rtt_p99_ms_spread"])
        out.append(
            f"| {r['arm']} | {r['sleep_ms']:.0f} | {r['over_p50_ms']:.1f} ({lo50:.1f}-{hi50:.1f}) "
            f"| {r['over_p99_ms']:.1f} ({lo99:.1f}-{hi99:.1f}) "
            f"| {r['up_bytes'] / 1e3:.1f} | {r['down_bytes'] / 1e3:.1f} | {_spread(r, 'client_cpu_ms')} "
            f"| {_spread(r, 'server_cpu_ms')} "
            f"| {_spread(r, 'req_per_s')} | {r['errors']} | {r.get('resends', 0)} |"
        )
    return "\n".join(out)


def scaling_table(rows: list[dict[str, Any]]) -> str:
    out = [
        (
            "| arm | servers | N | total req/s | per robot req/s (min-max) | p50 ms | p99 ms | Jain | errors "
            "| wrong chunks | server RSS MB |"
        ),
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        per = r["per_robot_req_s"] or [0.0]
        out.append(
            f"| {r['arm']} | {r['mode']} | {r['n']} | {r['req_per_s']:.1f} | {min(per):.1f}-{max(per):.1f} "
            f"| {r['rtt_p50_ms']:.1f} | {r['rtt_p99_ms']:.1f} | {r['jain']:.2f} | {r['errors']} | {r['wrong_chunks']} "
            f"| {r['server_rss_mb']:.0f} |"
        )
    return "\n".join(out)


def faults_table(rows: list[dict[str, Any]]) -> str:
    fmt: Callable[[float | None], str] = lambda v: "never" if v is None else f"{v:.2f}"  # noqa: E731
    out = [
        "| arm | fault | robot noticed after s | queue dry s | fresh actions again after s | server back after s | "
        "actions from a chunk >1 s late executed | worst chunk lag s | what the client raised |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        again = fmt(r["run_again_s"])
        if len(r.get("trials", [])) > 1:  # a median of trials: its spread, and how many
            lo_hi = r["run_again_s_spread"]
            again += (
                f" ({lo_hi[0]:.2f}-{lo_hi[1]:.2f}, {len(r['trials'])} trials)"
                if lo_hi
                else f" ({len(r['trials'])} trials)"
            )
        out.append(
            f"| {r['arm']} | {r['fault']} | {fmt(r['noticed_s'])} | {r['dry_s']:.2f} | {again} | "
            f"{fmt(r['server_back_s']) if r['fault'] == 'kill' else '-'} | {r['stale_executed']} | "
            f"{r['max_lag_s']:.2f} | "
            f"{', '.join(r['error_kinds']) or 'nothing'} |"
        )
    return "\n".join(out)


def vla_table(rows: list[dict[str, Any]]) -> str:
    """pi0 rows: each arm at each N, then ours / the best peer at that N (below 1: ours has the shorter round trip;
    above 1 for chunks/s: ours delivers more)."""
    first = rows[0] if rows else {}
    out = [
        f"pi0 {first.get('size', '')} ({first.get('parameters', 0) / 1e6:.1f} M parameters) "
        f"on {first.get('device', '')}. "
        "RTC: ours serves each robot's request with its prefix (the unexecuted head of its previous chunk) and batches "
        "as by default; the openpi- and GR00T-style servers run `predict_action_chunk` without RTC, as they do in "
        "reality: neither protocol carries a prefix.",
        "",
        (
            "| arm | N | RTC | round trip p50 ms | p99 ms | chunks/s | client CPU ms/req | server CPU ms/req "
            "| server RSS MB | errors | wrong chunks |"
        ),
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['arm']} | {r['n']} | {r['rtc']} | {_spread(r, 'rtt_p50_ms')} | {_spread(r, 'rtt_p99_ms')} "
            f"| {_spread(r, 'req_per_s')} | {_spread(r, 'client_cpu_ms')} | {_spread(r, 'server_cpu_ms')} "
            f"| {r['server_rss_mb']:.0f} | {r['errors']} | {r['wrong_chunks']} |"
        )
    ours = [r for r in rows if "vs_best_peer" in r]
    if ours:
        out += [
            "",
            (
                "| ours | N | p50 ours / best peer | p99 ours / best peer | chunks/s ours / best peer "
                "| robots per pass (max batch) |"
            ),
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in ours:
            v = r["vs_best_peer"]
            batch = f"{r.get('server_batch_mean') or 0:.2f} ({r.get('server_max_batch')})"
            out.append(
                f"| {r['arm']} | {r['n']} | {v['rtt_p50']:.2f} ({v['rtt_p50_peer']}) "
                f"| {v['rtt_p99']:.2f} ({v['rtt_p99_peer']}) "
                f"| {v['chunks_s']:.2f} ({v['chunks_s_peer']}) | {batch} |"
            )
    return "\n".join(out)


def link_table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| arm | link | time to first chunk s | round trip p50 ms | p99 ms | queue dry (% of 30 fps ticks) | errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ttfc = "never" if r["ttfc_s"] is None else f"{r['ttfc_s']:.2f}"
        out.append(
            f"| {r['arm']} | {r['link']} | {ttfc} | {r['rtt_p50_ms']:.0f} | {r['rtt_p99_ms']:.0f} | "
            f"{100 * r['dry_fraction']:.1f} | {r['errors'] + r['robot_errors']} |"
        )
    return "\n".join(out)


def plots(results: dict[str, Any], img: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    made = []
    lat = results.get("latency", [])
    if lat:
        arms = list(dict.fromkeys(r["arm"] for r in lat))
        sleeps = sorted({r["sleep_ms"] for r in lat})
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.8 / max(1, len(arms))
        for i, arm in enumerate(arms):
            rs = {r["sleep_ms"]: r for r in lat if r["arm"] == arm}
            xs = [k + i * width for k in range(len(sleeps))]
            axes[0].bar(xs, [rs[s]["over_p50_ms"] if s in rs else 0 for s in sleeps], width, label=arm)
            axes[0].scatter(xs, [rs[s]["over_p99_ms"] if s in rs else 0 for s in sleeps], marker="_", s=120, color="k")
        axes[0].set_xticks([k + 0.4 - width / 2 for k in range(len(sleeps))], [f"S={s:.0f} ms" for s in sleeps])
        axes[0].set_ylabel("round trip - S, ms (bar p50, tick p99)")
        axes[0].legend(fontsize=8)
        by_arm = {r["arm"]: r for r in lat if r["sleep_ms"] == sleeps[0]}
        axes[1].bar(list(by_arm), [r["up_bytes"] / 1e3 for r in by_arm.values()], color="tab:gray")
        axes[1].set_ylabel("kB per request on the wire")
        axes[1].set_yscale("log")
        axes[1].tick_params(axis="x", rotation=20)
        fig.suptitle("Two 640x480 cameras + 14-dim state -> 50x14 chunk, loopback (shared 2-core box)")
        fig.tight_layout()
        made.append(img / "peers-latency.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    sc = results.get("scaling", [])
    if sc:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for key in dict.fromkeys((r["arm"], r["mode"]) for r in sc):
            series = [r for r in sc if (r["arm"], r["mode"]) == key]  # this arm and mode's rows
            label = key[0] if key[1] == "one server" else f"{key[0]} ({key[1]})"
            axes[0].plot([r["n"] for r in series], [r["req_per_s"] for r in series], marker="o", label=label)
            axes[1].plot([r["n"] for r in series], [r["rtt_p99_ms"] for r in series], marker="o", label=label)
        s = sc[0]["sleep_ms"]
        axes[0].axhline(1000 / s, color="k", ls=":", label="one worker's ceiling 1/S")
        for ax, ylabel in ((axes[0], "chunks/s delivered, all robots"), (axes[1], "round trip p99, ms")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("robots N")
            ax.set_ylabel(ylabel)
        axes[1].set_yscale("log")
        axes[0].legend(fontsize=7)
        fig.suptitle(f"N saturating robots, stub S={s:.0f} ms")
        fig.tight_layout()
        made.append(img / "peers-scaling.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    ln = results.get("link", [])
    if ln:
        fig, ax = plt.subplots(figsize=(8, 4))
        links = list(dict.fromkeys(r["link"] for r in ln))
        arms = list(dict.fromkeys(r["arm"] for r in ln))
        width = 0.8 / max(1, len(arms))
        for i, arm in enumerate(arms):
            rs = {r["link"]: r for r in ln if r["arm"] == arm}
            ax.bar(
                [k + i * width for k in range(len(links))],
                [rs[k]["rtt_p50_ms"] if k in rs else 0 for k in links],
                width,
                label=arm,
            )
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(links))], links)
        ax.axhline(1000 * 25 / 30, color="k", ls=":", label="half a 50-step chunk at 30 fps")
        ax.set_ylabel("round trip p50, ms (S = 20 ms)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        ax.set_title("Constrained link: tc tbf + delay relay between namespaces")
        fig.tight_layout()
        made.append(img / "peers-link.png")
        fig.savefig(made[-1], dpi=110)
        plt.close(fig)
    return made


def write_report(results: dict[str, Any], out: Path, img: Path | None = None) -> None:
    parts = [
        f"Run {results.get('started', '')}, {results.get('duration_s', 0) / 60:.1f} min, sizes {results.get('sizes')}"
    ]
    if results.get("latency"):
        parts += ["", "### Per request", "", latency_table(results["latency"])]
    if results.get("scaling"):
        parts += ["", "### Scaling", "", scaling_table(results["scaling"])]
    if results.get("vla"):
        parts += ["", "### pi0 (vla)", "", vla_table(results["vla"])]
    if results.get("faults"):
        parts += ["", "### Faults", "", faults_table(results["faults"])]
    if results.get("link"):
        parts += ["", "### Constrained link", "", link_table(results["link"])]
    (out / "tables.md").write_text("\n".join(parts) + "\n")
    plots(results, img or out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("dir")
    ap.add_argument("--img", default=None, help="where the PNGs go (default: DIR)")
    args = ap.parse_args()
    out = Path(args.dir)
    write_report(json.loads((out / "results.json").read_text()), out, Path(args.img) if args.img else None)


if __name__ == "__main__":
    main()
