#!/usr/bin/env bash
# What the browser test (scripts/browser_test.mjs) needs, installed once and then reused:
# - headless Chromium from Debian's `chromium` package (apt-get; skipped when already installed);
# - `playwright-core` from npm, pinned, into $CARGO_TARGET_DIR/browser (it drives the system
#   Chromium through `executablePath` and downloads no browser of its own).
# Prints the Chromium path on its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PLAYWRIGHT_CORE=1.65.1
DIR="${CARGO_TARGET_DIR:-target}/browser"

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "installing Debian's chromium (apt-get)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi

installed="$(node -p 'try{require(require("path").resolve(process.argv[1])).version}catch(e){""}' \
  "$DIR/node_modules/playwright-core/package.json" 2>/dev/null || true)"
if [ "$installed" != "$PLAYWRIGHT_CORE" ]; then
  echo "installing playwright-core@$PLAYWRIGHT_CORE into $DIR" >&2
  mkdir -p "$DIR"
  [ -f "$DIR/package.json" ] || echo '{"private": true}' >"$DIR/package.json"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$DIR" --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_CORE"
fi
command -v chromium
