# Sourced by scripts/gpu-check.sh and scripts/gpu-engine-check.sh (after they set `log`): JSON
# string quoting, the one-line failure summary, the driver's libcuda on the loader's path, and
# `device` / `driver` as JSON values read from nvidia-smi (null without one); `summarise_run`.

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

# Summarises a libtest run of GPU tests from `out` (its output) and `rc` (its exit status): sets
# `checks` (the JSON objects tests printed after "MARKER ", comma-joined), `failed_json` (the
# failed test names as JSON strings), `passed` / `nfailed` (libtest's counts), `skipped` (a test
# reported "skipped": true, i.e. no GPU), `timed_out`, and `ok` (ran, passed, not skipped, and
# reported something). With --nocapture a marker line comes after libtest's "test name ... "
# prefix, so it is taken from anywhere in a line; failed tests are the names libtest lists under
# the last "failures:" header (indented by four spaces).
summarise_run() {
  local marker=$1 name result
  checks=$(printf '%s\n' "$out" | grep -o "$marker {.*}" | sed "s/^$marker //" | paste -sd, -)
  local failed
  failed=$(printf '%s\n' "$out" | awk '/^failures:$/ {n = 0; delete names; inlist = 1; next}
    inlist && /^    [^ ]/ {names[n++] = substr($0, 5); next}
    inlist && /^$/ {next}
    {inlist = 0}
    END {for (i = 0; i < n; i++) print names[i]}')
  failed_json=""
  while IFS= read -r name; do
    [ -n "$name" ] && failed_json="$failed_json${failed_json:+, }$(json_str "$name")"
  done <<<"$failed"
  result=$(printf '%s\n' "$out" | grep '^test result:' | tail -n1)
  passed=$(echo "$result" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
  nfailed=$(echo "$result" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
  skipped=false
  printf '%s\n' "$out" | grep -q "$marker .*\"skipped\": *true" && skipped=true
  ok=false
  if [ "$rc" -eq 0 ] && [ "$skipped" = false ] && [ -n "$checks" ]; then ok=true; fi
  timed_out=false
  [ "$rc" -eq 124 ] && timed_out=true
}
