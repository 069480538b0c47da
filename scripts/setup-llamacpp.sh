#!/usr/bin/env bash
# Installs the two llama.cpp servers Ponder's third-party backend tests run against, both from
# one download of the pinned llama-cpp-python sdist (PyPI) and one C++ build, under
# ${CARGO_TARGET_DIR:-target}:
#
# - llama.cpp's own C++ `llama-server` (parallel slots, continuous batching, prefix cache: what
#   people deploy), built from the sdist's vendored llama.cpp tree with shared libraries into
#   llama-server/bin/ (tests/backend_llama_server.rs, `ponder bench serve`);
# - llama-cpp-python's OpenAI server, installed from the same sdist into llamacpp-venv/ without a
#   C++ build of its own (`LLAMA_BUILD=OFF`): the package loads the libraries the first build made,
#   copied into its `lib/` where it looks for them (tests/backend_llamacpp.rs). One compile of
#   llama.cpp instead of two: on the 2-core CI machine the second one cost ~10 minutes.
#
# Kept under the target dir so CI's cache of it carries the builds between runs; a part already
# built at this version is left alone (a second run takes a second).
#
# The build is cut to what the servers need: no llama.cpp tests or examples, no web UI, no
# OpenMP (ggml's own thread pool), no HTTPS, and no AMX (llama.cpp's AMX kernels fault in this
# project's Firecracker VMs: see scripts/peer_llamacpp.py). Above ggml it is a unity build
# (CMake joins each library's sources into a few translation units, so the JSON and template
# headers most of them include are compiled a few times instead of once a file): ~20% less
# compile time (BENCHMARKS.md). ggml, where the server spends its time, is compiled file by
# file as upstream builds it, so the benchmarks' llama.cpp baseline runs the same kernels. Some
# sources are compiled on their own: mtmd's two helpers (they refuse mtmd's internal headers),
# common's json.cpp (it specialises templates its neighbours use) and jinja/ (each file names
# itself in a macro).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VERSION=0.3.36
TARGET="${CARGO_TARGET_DIR:-target}"
VENV="$TARGET/llamacpp-venv"
SDIST_DIR="$TARGET/llamacpp-sdist"
SDIST="$SDIST_DIR/llama_cpp_python-$VERSION.tar.gz"
SERVER_DIR="$TARGET/llama-server"
SERVER="$SERVER_DIR/bin/llama-server"
NO_AMX='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

python_ready() {
  [ -x "$VENV/bin/python" ] &&
    [ "$("$VENV/bin/python" -c 'import llama_cpp; print(llama_cpp.__version__)' 2>/dev/null)" = "$VERSION" ] &&
    "$VENV/bin/python" -c 'import llama_cpp.server, uvicorn' 2>/dev/null
}
server_ready() {
  [ -x "$SERVER" ] && [ "$(cat "$SERVER_DIR/VERSION" 2>/dev/null)" = "$VERSION" ]
}
if python_ready && server_ready; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# The one download: the sdist, kept beside the builds (pip's own client, PyPI only).
if [ ! -f "$SDIST" ]; then
  "$VENV/bin/pip" download -q --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$SDIST_DIR"
fi

if ! server_ready; then
  start=$(date +%s)
  # CMake from its PyPI wheel, in the same venv (the Debian image has none).
  "$VENV/bin/pip" install -q --disable-pip-version-check cmake==4.4.4
  SRC="$SERVER_DIR/src"
  rm -rf "$SRC" "$SERVER_DIR/build" "$SERVER_DIR/bin" "$SERVER_DIR/VERSION"
  mkdir -p "$SRC"
  tar -xzf "$SDIST" -C "$SRC" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
  echo 'set_target_properties(ggml-base ggml-cpu ggml PROPERTIES UNITY_BUILD OFF)' \
    >>"$SRC/ggml/src/CMakeLists.txt"
  echo 'set_source_files_properties(mtmd-helper.cpp mtmd-helper-gen.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)' \
    >>"$SRC/tools/mtmd/CMakeLists.txt"
  echo 'set_source_files_properties(json.cpp jinja/caps.cpp jinja/lexer.cpp jinja/parser.cpp
    jinja/runtime.cpp jinja/value.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)' \
    >>"$SRC/common/CMakeLists.txt"
  # Shared libraries, each finding the others beside itself ($ORIGIN), so the binary and the
  # libraries can move out of the build tree together.
  "$VENV/bin/cmake" -S "$SRC" -B "$SERVER_DIR/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" -DBUILD_SHARED_LIBS=ON \
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DGGML_OPENMP=OFF >/dev/null
  "$VENV/bin/cmake" --build "$SERVER_DIR/build" --target llama-server >/dev/null
  mkdir -p "$SERVER_DIR/bin"
  cp -a "$SERVER_DIR/build/bin/llama-server" "$SERVER_DIR"/build/bin/lib*.so* "$SERVER_DIR/bin/"
  echo "$VERSION" >"$SERVER_DIR/VERSION"
  # The sources and objects are not needed to run it.
  rm -rf "$SRC" "$SERVER_DIR/build"
  echo "llama-server (llama.cpp vendored by llama-cpp-python $VERSION) built in $SERVER in $(($(date +%s) - start)) s" >&2
fi

if ! python_ready; then
  start=$(date +%s)
  # The Python package without its own C++ build (and without the multimodal library, which the
  # text server loads only for image chat formats).
  CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF" "$VENV/bin/pip" install -q \
    --disable-pip-version-check --no-cache-dir "llama-cpp-python[server] @ file://$(realpath "$SDIST")"
  # It loads libllama / libggml* (and libmtmd, for image formats) from its own lib/ directory.
  package=$("$VENV/bin/python" -c \
    'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("llama_cpp").origin))')
  mkdir -p "$package/lib"
  cp -a "$SERVER_DIR"/bin/libllama.so* "$SERVER_DIR"/bin/libggml*.so* "$SERVER_DIR"/bin/libmtmd.so* \
    "$package/lib/"
  echo "llama-cpp-python $VERSION installed in $VENV on llama-server's libraries in $(($(date +%s) - start)) s" >&2
fi
