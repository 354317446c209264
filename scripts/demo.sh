#!/usr/bin/env bash
# `make demo`: the main job on the embedded CPU default. Launches the local reference topology (prefill TP2 ->
# decode TP1 over NIXL behind the real sglang-router), checks it, evaluates it, proves parity, tears it down.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
TOPO=configs/local-cpu.yaml
CKPT=.pdctl/checkpoints/reference-tiny
REF_TOPO=configs/local-cpu-reference.yaml

step() { printf '\n\033[1;36m== %s\033[0m\n' "$*"; }
cleanup() { pdctl down >/dev/null 2>&1 || true; }
trap cleanup EXIT

step "reference checkpoint ($CKPT)"
[ -f "$CKPT/config.json" ] || pdctl reference init-checkpoint "$CKPT" --seed 0

step "pdctl check-compat $TOPO"
pdctl check-compat "$TOPO"

step "pdctl launch $TOPO --detach"
pdctl launch "$TOPO" --detach --timeout 180

step "pdctl status"
pdctl status

step "pdctl eval gsm8k (short)"
pdctl eval gsm8k --data-file tests/data/gsm8k_test_50.jsonl --num-questions 10 --num-shots 2 \
  --max-new-tokens 32 --parallel 10 --json .pdctl/demo-eval.json

step "pdctl parity --cold --warm (GPU-like numerics; against a colocated TP1 reference launched from $REF_TOPO)"
# TP2 -> TP1 against TP1 rounds differently: parity starts a TP2 control and judges against that noise floor
pdctl parity --cold --warm --reference-topology "$REF_TOPO" --numerics gpu-like \
  --report .pdctl/demo-parity.html --json .pdctl/demo-parity.json

step "pdctl down"
pdctl down
trap - EXIT
echo; echo "demo finished: eval -> .pdctl/demo-eval.json, parity -> .pdctl/demo-parity.html"
