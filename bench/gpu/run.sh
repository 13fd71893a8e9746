#!/usr/bin/env bash
# The GPU rows, on a bare GPU machine without network (the `device` tool's machine), in one run of under 8 minutes:
#   1. set up from .gpu-wheels/ (made beforehand by bench/gpu/fetch_wheels.sh on a machine with the index);
#   2. stock pi0 (bfloat16, 224 px, 10 steps, chunk 50, RTC): the server's pass, eager and compiled, at B = 1 and 8,
#      with compile time, memory and each pass's parts, then two starts of the real server (the second from cache);
#   3. stock SmolVLA: the pass at B = 1, eager and compiled;
#   4. if time is left, the peers' vla phase at N = 1 and 8 (ours compiled, ours eager, openpi's server).
# Every step writes its log and JSON under $OUT (default /tmp/gpu-rows) as it ends, so a run cut short keeps what it
# measured. Usage (from the repository root): OUT=... bash bench/gpu/run.sh [seconds budget, default 470]
set -uo pipefail
cd "$(dirname "$0")/../.."
budget=${1:-470}
out=${OUT:-/tmp/gpu-rows}
mkdir -p "$out"
start=$(date +%s)
left() { echo $((budget - ($(date +%s) - start))); }
log() { echo "[gpu-rows +$(($(date +%s) - start))s] $*" | tee -a "$out/run.log"; }

site=/tmp/gpu-site
if [ ! -d "$site/lerobot" ]; then
  python3 -m pip install --quiet --no-index --no-deps --target "$site" .gpu-wheels/*.whl || exit 1
  cp -r .gpu-wheels/av-stand-in/* "$site/"
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
bin=$(dirname "$(command -v python3)")
for tool in lerobot-policy-server lerobot-fleet; do  # the test kit starts them from sys.executable's folder
  [ -x "$bin/$tool" ] || ln -sf "$site/bin/$tool" "$bin/$tool"
done
sed -i "1s|.*|#!$(command -v python3)|" "$site"/bin/lerobot-* 2>/dev/null
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; uptime; nproc
  python3 -c 'import torch, lerobot; print("torch", torch.__version__, "cuda", torch.version.cuda, "lerobot", lerobot.__version__)'
  python3 -c 'import cv2' 2>/dev/null || echo "no cv2 here: the peers phase's robot clients need opencv"
  git log -1 --format='commit %h %s' 2>/dev/null; } 2>&1 | tee "$out/machine.txt"
log "setup done"

step() {  # step NAME MIN_SECONDS_LEFT COMMAND...: runs when enough time is left, bounded by what is left
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then log "$name: skipped ($(left) s left, needs $need)"; return; fi
  log "$name: start ($(left) s left)"
  timeout -s TERM "$(left)" "$@" > "$out/$name.log" 2>&1
  log "$name: exit $? ; $(grep -E '^(B=|start |pi0|stock|vla |.*pass time)' "$out/$name.log" | tail -8 | tr '\n' ';')"
}

step engine_pi0 240 python3 bench/engine.py --device cuda --models vla --vla-model pi0 --buckets 1 8 \
  --choices off on --reps 10 --restart 2 --json "$out/engine_pi0.json"
step engine_smolvla 120 python3 bench/engine.py --device cuda --models vla --vla-model smolvla --buckets 1 \
  --choices off on --reps 10 --json "$out/engine_smolvla.json"
step peers_vla 200 python3 -m bench.peers.run --phases vla --vla-device cuda --vla-n 1 8 \
  --vla-arms ours-jpeg ours-eager openpi-ws --out "$out/peers"
# servers a cut-short step left behind keep their GPU memory: end them by PID
for pid in $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do kill "$pid" 2>/dev/null; done
log "done"
