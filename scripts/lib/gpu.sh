# Sourced by scripts/gpu-check.sh and scripts/gpu-engine-check.sh (after they set `log`): JSON
# string quoting, the one-line failure summary, the driver's libcuda on the loader's path, and
# `device` / `driver` as JSON values read from nvidia-smi (null without one).

# `s` as a JSON string literal.
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

fail() {
  printf '{"ok": false, "error": %s, "log": %s}\n' "$(json_str "$1")" "$(json_str "$log")"
  exit 1
}

# The driver's libcuda may live outside the loader's default path.
for dir in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu; do
  if [ -e "$dir/libcuda.so.1" ]; then
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    break
  fi
done

device=null
driver=null
if command -v nvidia-smi >/dev/null 2>&1; then
  info=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)
  if [ -n "$info" ]; then
    device=$(json_str "${info%%,*}")
    driver=$(json_str "$(echo "${info#*,}" | tr -d ' ')")
  fi
fi
