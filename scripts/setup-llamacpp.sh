#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI server (pinned release, built from the PyPI sdist) into
# ${CARGO_TARGET_DIR:-target}/llamacpp-venv, the third-party backend tests/backend_llamacpp.rs runs
# Ponder against. Kept under the target dir so CI's cache of it carries the build between runs;
# a venv that already has this version is left alone (a second run takes a second).
#
# The build is cut to what the server needs: no llama.cpp tests, examples, tools or C++ server,
# no OpenMP (ggml's own thread pool), and no AMX (llama.cpp's AMX kernels fault in this project's
# Firecracker VMs: see scripts/peer_llamacpp.py). From a cold start on the 2-core CI machine the
# build is the slow part (minutes); it is not repeated while the cache holds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VERSION=0.3.36
VENV="${CARGO_TARGET_DIR:-target}/llamacpp-venv"
if [ -x "$VENV/bin/python" ] &&
  [ "$("$VENV/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null)" = "$VERSION" ] &&
  "$VENV/bin/python" -c 'import llama_cpp.server, uvicorn' 2>/dev/null; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
NO_AMX='-mno-amx-tile\ -mno-amx-int8\ -mno-amx-bf16' # escaped spaces: CMAKE_ARGS splits on spaces
export CMAKE_ARGS="-DCMAKE_C_FLAGS=$NO_AMX -DCMAKE_CXX_FLAGS=$NO_AMX -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
start=$(date +%s)
"$VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir \
  "llama-cpp-python[server]==$VERSION"
echo "llama-cpp-python $VERSION installed in $VENV in $(($(date +%s) - start)) s" >&2
