#!/usr/bin/env bash
# The proof of issue 13: `specmon sweep` over 0,1,3,5 on the real vLLM kit, through a managed
# profile over a real OpenSSH sshd on 127.0.0.1 (the README's path). Usage:
#   bash bench/proof_sweep.sh OUTDIR [VLLM_PORT] [extra sweep options...]
# Writes OUTDIR/config.toml, OUTDIR/sweep.json (stdout), OUTDIR/sweep.err (progress). Stops sshd in a trap;
# the vLLM server is left as --finish says (stop it by OUTDIR/vllm/vllm.pid).
set -euo pipefail
out=$(realpath -m "$1"); vport=${2:-18211}; shift 2 || true
here=$(cd "$(dirname "$0")/.." && pwd)
# PROOF_USER: log in as this user instead (a /bin/sh account avoids a slow login shell on a shared machine).
user=${PROOF_USER:-$(id -un)}
mkdir -p "$out/vllm"
chmod 755 "$out"; chmod 777 "$out/vllm"
source /work/shared/recipes/sshd_loopback.sh
sshd_up "$out/ssh"
trap sshd_down EXIT
venv=${VLLM_VENV:-/tmp/vllmenv}; model=${VLLM_MODEL:-/tmp/tinyllama}
cat > "$out/config.toml" <<CFG
[profiles.cpu-vllm]
host = "$user@127.0.0.1"
port = $SSHD_PORT
identity = "$CLIENT_HOME/.ssh/id_ed25519"
log = "$out/vllm/vllm_0.log"
engine = "vllm"

[profiles.cpu-vllm.launch]
mode = "managed"
engine = "vllm"
argv = ["$venv/bin/vllm", "serve", "$model", "--host", "127.0.0.1", "--port", "{port}", "--max-model-len", "1024",
        "--speculative-config", '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": 4}']
nospec_argv = ["$venv/bin/vllm", "serve", "$model", "--host", "127.0.0.1", "--port", "{port}", "--max-model-len", "1024"]
log = "$out/vllm/vllm_{steps}.log"
pidfile = "$out/vllm/vllm.pid"
port = $vport
steps_min = 0
steps_max = 8
ready_marker = "Application startup complete"
health_url = "http://127.0.0.1:{port}/health"
start_timeout_s = 300
stop_grace_s = 20

[profiles.cpu-vllm.launch.env]
HF_HUB_OFFLINE = "1"
TRANSFORMERS_OFFLINE = "1"
VLLM_NO_USAGE_STATS = "1"
DO_NOT_TRACK = "1"
VLLM_HOST_IP = "127.0.0.1"
VLLM_CPU_KVCACHE_SPACE = "1"
VLLM_LOG_STATS_INTERVAL = "2"
CFG
start=$(date +%s)
HOME="$CLIENT_HOME" XDG_DATA_HOME="$out/data" XDG_STATE_HOME="$out/state" \
  "$here/.venv/bin/specmon" sweep cpu-vllm --config "$out/config.toml" --steps 0,1,3,5 --concurrency 1 -y \
  --format json --fresh --state "$out/state.json" "$@" >"$out/sweep.json" 2>"$out/sweep.err" || echo "exit $?" >>"$out/sweep.err"
echo "wall seconds: $(( $(date +%s) - start ))" | tee -a "$out/sweep.err"
