# Shared helpers for rpcie's integration tests (sourced, bash).
# Exit codes: 0 pass, 77 skip (with a reason on stderr), anything else fail.
set -u

PIDS=()
CLEANUPS=()
TMP=$(mktemp -d /tmp/rpcie-it.XXXXXX)

cleanup() {
  local rc=$?
  local i
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; done
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[$i]}" 2>/dev/null || true; done
  rm -rf "$TMP"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

skip() { echo "SKIP: $*" >&2; exit 77; }
die() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# wait_file FILE SECONDS: poll until FILE exists and is non-empty (no sleeping guesses).
wait_file() {
  local f=$1 deadline=$((SECONDS + $2))
  while [ ! -s "$f" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.05
  done
}

# start_bg CMD...: runs CMD in the background; its pid goes to LAST_PID and is killed on exit.
start_bg() {
  "$@" &
  PIDS+=($!)
  LAST_PID=$!
}
