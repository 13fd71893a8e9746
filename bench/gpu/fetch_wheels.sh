#!/usr/bin/env bash
# Run on a machine with the package index (a development box), before a GPU machine without network is lent:
# puts into .gpu-wheels/ (ignored by git; carried to the GPU machine with the checkout) every wheel that machine's
# image lacks for serving lerobot 0.6.1 policies (docs: ../shared/notes/offline-gpu-box.md), this project's own
# wheel, and a stand-in for PyAV (serving never decodes video; lerobot imports `av` at module level).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.gpu-wheels
rm -rf "$out" && mkdir -p "$out"
py=.venv/bin/python
[ -x "$py" ] || py=python3
"$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
  --platform any -d "$out" \
  lerobot==0.6.1 transformers==5.5.4 tokenizers==0.22.2 eclipse-zenoh==1.10.2 draccus==0.11.6 \
  mergedeep==1.3.4 toml==0.10.2 simplejpeg==1.9.0 json5==0.17.3 gymnasium==1.4.0 \
  farama-notifications==0.0.6 termcolor==3.3.0 datasets==4.8.5 dill==0.4.1 multiprocess==0.70.19 \
  jsonlines==4.0.0 pytz==2026.6 diffusers==0.39.0 pyzmq==27.3.0 websockets==17.4 openpi-client==0.1.2 \
  msgpack textual==8.2.8 rich prometheus-client httpx httpcore h11 anyio sniffio certifi idna pyyaml
# not carried: opencv (56 MB; only the robot side resizes with it, lazily) and cryptography (the PKI verbs)
# pure-Python packages published as source only (SmolVLA's processor needs num2words, which needs docopt)
"$py" -m pip wheel --quiet --no-deps -w "$out" num2words docopt
"$py" -m pip wheel --quiet --no-deps --no-build-isolation -w "$out" .
stand_in="$out/av-stand-in"
mkdir -p "$stand_in/av" "$stand_in/av-15.1.0.dist-info"
cat > "$stand_in/av/__init__.py" <<'PY'
"""A stand-in for PyAV on a serving machine: lerobot imports `av` at module level; serving never decodes video."""


class _Any:
    def __getattr__(self, _name):
        return self

    def __call__(self, *_args, **_kwargs):
        return self

    def __or__(self, _other):
        return self

    __ror__ = __or__


class logging:  # noqa: N801 (the name PyAV exports)
    WARNING = 30
    ERROR = 40

    @staticmethod
    def restore_default_callback():
        return None

    @staticmethod
    def set_level(_level):
        return None


def __getattr__(_name):
    return _Any()
PY
printf 'Metadata-Version: 2.1\nName: av\nVersion: 15.1.0\n' > "$stand_in/av-15.1.0.dist-info/METADATA"
echo "wheels for the GPU machine: $(du -sh "$out" | cut -f1) in $out ($(ls "$out"/*.whl | wc -l) wheels)"
