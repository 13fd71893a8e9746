"""Codec cost per request vs the bare cv2 JPEG floor, measured side by side in one run.

Workload (one request each way): 2 cameras 640x480 RGB + 14-DoF state + RTC prefixes (10x14) up,
a 50x14 chunk (model + robot space) down. For JPEG the floor is `cv2.imencode`/`cv2.imdecode` of the
same two frames; our overhead is everything beyond that (colour conversion, header check, msgpack,
tensor validation). Repeats R rounds of N requests and reports medians and spread.

Then the codec candidates, side by side (medians, microseconds per frame, quality 90, 4:2:0): cv2,
simplejpeg and PyTurboJPEG (when libturbojpeg is installed) encoding and decoding 480x640, 240x320 and
96x128 RGB frames, and decoding a 480x640 frame straight to 1/4 scale in the DCT domain (what the server
does when the model eats 120x160 or less). The product's codec (wire/images.py) is the fastest of these.

    .venv/bin/python bench/codec.py [--rounds 5] [--n 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import cv2
import numpy as np
import simplejpeg

from lerobot_policy_remote.wire.data import (
    ActionChunkMsg,
    ObservationMsg,
    decode_chunk,
    decode_observation,
    encode_chunk,
    encode_observation,
)


def scene(seed: int) -> np.ndarray:
    """A camera-like frame: smooth gradient + sensor noise (JPEG size ~ a real 480p frame)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:480, 0:640]
    img = np.stack([(x * 255 / 640), (y * 255 / 480), ((x + y) * 255 / 1120)], axis=-1)
    img = img + rng.normal(0, 8, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def timed(fn, n: int) -> float:
    """Mean microseconds per call over n calls."""
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def turbojpeg_or_none():
    """PyTurboJPEG needs the system libturbojpeg (apt libturbojpeg0): measured only where both are present."""
    try:
        from turbojpeg import TJPF_RGB, TJSAMP_420, TurboJPEG

        return TurboJPEG(), TJPF_RGB, TJSAMP_420
    except Exception as exc:  # not installed, or the shared library is missing
        print(f"(PyTurboJPEG not measured: {type(exc).__name__}: {exc})")
        return None


def candidates(rounds: int, n: int) -> None:
    """Encode/decode medians per library and frame size; the DCT-domain downscale row for a 1/4-size target."""
    tj = turbojpeg_or_none()
    jpeg, pf, samp = tj if tj is not None else (None, 0, 0)
    rows: dict[str, list[float]] = {}
    for h, w in ((480, 640), (240, 320), (96, 128)):
        rgb = cv2.resize(scene(0), (w, h), interpolation=cv2.INTER_AREA)
        data = simplejpeg.encode_jpeg(rgb, quality=90, colorspace="RGB", colorsubsampling="420")
        arr = np.frombuffer(data, np.uint8)
        cases = {
            f"cv2 encode {h}x{w}": lambda rgb=rgb: cv2.imencode(
                ".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90]
            ),
            f"simplejpeg encode {h}x{w}": lambda rgb=rgb: simplejpeg.encode_jpeg(
                rgb, quality=90, colorspace="RGB", colorsubsampling="420"
            ),
            f"cv2 decode {h}x{w}": lambda arr=arr: cv2.imdecode(arr, cv2.IMREAD_COLOR_RGB),
            f"simplejpeg decode {h}x{w}": lambda data=data: simplejpeg.decode_jpeg(data, colorspace="RGB"),
        }
        if jpeg is not None:
            cases[f"turbojpeg encode {h}x{w}"] = lambda rgb=rgb: jpeg.encode(
                rgb, quality=90, pixel_format=pf, jpeg_subsample=samp
            )
            cases[f"turbojpeg decode {h}x{w}"] = lambda data=data: jpeg.decode(data, pixel_format=pf)
        if h == 480:
            cases["cv2 decode 480x640 at 1/4 (IMREAD_REDUCED)"] = lambda arr=arr: cv2.imdecode(
                arr, cv2.IMREAD_REDUCED_COLOR_4
            )
            cases["simplejpeg decode 480x640 at 1/4 (DCT)"] = lambda data=data: simplejpeg.decode_jpeg(
                data, colorspace="RGB", min_height=120, min_width=160
            )
            if jpeg is not None:
                cases["turbojpeg decode 480x640 at 1/4 (DCT)"] = lambda data=data: jpeg.decode(
                    data, pixel_format=pf, scaling_factor=(1, 4)
                )
        for _ in range(rounds):
            for name, fn in cases.items():
                fn()
                rows.setdefault(name, []).append(timed(fn, n))
    print(f"\ncodec candidates (quality 90, 4:2:0; {rounds} rounds x {n} calls)")
    print(f"{'case':44} {'median us':>10} {'min':>9} {'max':>9}")
    for name, vals in rows.items():
        print(f"{name:44} {statistics.median(vals):10.1f} {min(vals):9.1f} {max(vals):9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=100)
    args = ap.parse_args()

    frames = {"observation.images.front": scene(0), "observation.images.wrist": scene(1)}
    bgr = [cv2.cvtColor(f, cv2.COLOR_RGB2BGR) for f in frames.values()]
    obs = ObservationMsg(
        state={"observation.state": np.linspace(-1, 1, 14, dtype=np.float32)},
        images=frames,
        task="fold the towel",
        inference_delay_steps=4,
        prefix_model=np.ones((10, 14), np.float32),
        prefix_robot=np.ones((10, 14), np.float32),
    )
    chunk = ActionChunkMsg(np.ones((50, 14), np.float32), np.ones((50, 14), np.float32), "s", 1, 2, 1.0, 20.0)
    jpeg_bytes = [cv2.imencode(".jpg", b, [cv2.IMWRITE_JPEG_QUALITY, 90])[1] for b in bgr]

    cases = {
        "floor: cv2.imencode x2 (q90)": lambda: [cv2.imencode(".jpg", b, [cv2.IMWRITE_JPEG_QUALITY, 90]) for b in bgr],
        "floor: cv2.imdecode x2": lambda: [cv2.imdecode(j, cv2.IMREAD_COLOR) for j in jpeg_bytes],
        "ours: encode obs (q90)": lambda: encode_observation(obs, 90),
        "ours: decode obs (q90)": None,
        "ours: encode obs (raw)": lambda: encode_observation(obs, 0),
        "ours: decode obs (raw)": None,
        "ours: encode chunk 50x14": lambda: encode_chunk(chunk),
        "ours: decode chunk 50x14": None,
    }
    jpeg_payload = encode_observation(obs, 90)
    raw_payload = encode_observation(obs, 0)
    chunk_payload = encode_chunk(chunk)
    cases["ours: decode obs (q90)"] = lambda: decode_observation(jpeg_payload)
    cases["ours: decode obs (raw)"] = lambda: decode_observation(raw_payload)
    cases["ours: decode chunk 50x14"] = lambda: decode_chunk(chunk_payload)

    results: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, fn in cases.items():  # interleaved: each round measures every case under the same load
            fn()
            results[name].append(timed(fn, args.n))

    # Paired: floor and ours alternate request by request, so both see the same machine load.
    floor_req = lambda: (
        [
            cv2.imdecode(
                np.frombuffer(cv2.imencode(".jpg", b, [cv2.IMWRITE_JPEG_QUALITY, 90])[1], np.uint8), cv2.IMREAD_COLOR
            )
            for b in bgr
        ]
    )
    ours_req = lambda: (decode_observation(encode_observation(obs, 90)), decode_chunk(encode_chunk(chunk)))
    ratios = []
    for _ in range(args.rounds):
        f_s, o_s = [], []
        for i in range(args.n):
            first, second = (floor_req, ours_req) if i % 2 == 0 else (ours_req, floor_req)  # alternate order
            t0 = time.perf_counter()
            first()
            t1 = time.perf_counter()
            second()
            t2 = time.perf_counter()
            (f_s if first is floor_req else o_s).append(t1 - t0)
            (o_s if first is floor_req else f_s).append(t2 - t1)
        ratios.append(statistics.median(o_s) / statistics.median(f_s))

    med = {k: statistics.median(v) for k, v in results.items()}
    print(
        f"payload sizes: obs q90 {len(jpeg_payload):,} B, obs raw {len(raw_payload):,} B, "
        f"chunk {len(chunk_payload):,} B"
    )
    print(f"{'case':34} {'median us':>10} {'min':>9} {'max':>9}")
    for name, vals in results.items():
        print(f"{name:34} {med[name]:10.1f} {min(vals):9.1f} {max(vals):9.1f}")
    floor_rt = med["floor: cv2.imencode x2 (q90)"] + med["floor: cv2.imdecode x2"]
    ours_rt = (
        med["ours: encode obs (q90)"]
        + med["ours: decode obs (q90)"]
        + med["ours: encode chunk 50x14"]
        + med["ours: decode chunk 50x14"]
    )
    print(
        f"\nJPEG request round trip (encode+decode obs, encode+decode chunk): ours {ours_rt / 1000:.2f} ms, "
        f"cv2 floor {floor_rt / 1000:.2f} ms, ratio {ours_rt / floor_rt:.3f} "
        f"(overhead {100 * (ours_rt / floor_rt - 1):.1f}%)"
    )
    print(
        f"paired per-request ratio ours/floor: median {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {args.rounds} rounds x {args.n} requests)"
    )
    raw_rt = med["ours: encode obs (raw)"] + med["ours: decode obs (raw)"]
    print(f"raw obs encode+decode: {raw_rt / 1000:.2f} ms")
    candidates(args.rounds, args.n)


if __name__ == "__main__":
    main()
