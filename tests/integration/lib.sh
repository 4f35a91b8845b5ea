# Shared helpers for rpcie's integration tests (sourced, bash).
# Exit codes: 0 pass, 77 skip (with a reason on stderr), anything else fail.
set -u

PIDS=()
CLEANUPS=()
CHECKS_SKIPPED=()
TMP=$(mktemp -d /tmp/rpcie-it.XXXXXX)

cleanup() {
  local rc=$?
  local i
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && shm_regions_drop "$pid"; done
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[$i]}" 2>/dev/null || true; done
  rm -rf "$TMP"
  if [ "$rc" = 0 ] && [ ${#CHECKS_SKIPPED[@]} -gt 0 ]; then
    for i in "${CHECKS_SKIPPED[@]}"; do echo "SKIP: $i" >&2; done
    rc=77
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# skip WHY: exit 77 (meson: skipped). Under CI=true, where every capability is present, a
# skip is a failure.
skip() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: would skip under CI=true: $*" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit 77
}
# skip_check WHY: one check of the test cannot run here; the others go on, and the test then
# ends with 77 (skipped, WHY on stderr) instead of passing. Under CI=true a failure at once.
skip_check() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: would skip a check under CI=true: $*" >&2
    exit 1
  fi
  echo "note: check not run: $*" >&2
  CHECKS_SKIPPED+=("$*")
}
# stop_wait PID: SIGSTOP, then waits (at most 5 s) until every thread of PID is stopped.
# kill(2) returns before a busy multithreaded process has stopped: an exporter was seen to
# answer a request 0.2-0.9 ms after the kill returned (3 of 40 tries).
stop_wait() {
  local pid=$1 deadline=$((SECONDS + 5)) t s running
  kill -STOP "$pid" || return 1
  while :; do
    running=0
    for t in /proc/"$pid"/task/*/stat; do
      s=$(cat "$t" 2>/dev/null) || continue
      s=${s##*) }  # the state follows the command name, which may hold spaces
      case ${s%% *} in T | t | Z | X) ;; *) running=1 ;; esac
    done
    [ $running = 0 ] && return 0
    [ $SECONDS -ge $deadline ] && { echo "stop_wait: $pid has not stopped within 5 s" >&2; return 1; }
    sleep 0.001
  done
}
# shm_regions_drop PID: removes the libfabric shm regions (/dev/shm/PID:*, 16 MiB of memory
# each) of a process this test killed with SIGKILL, which cannot remove them itself.
shm_regions_drop() { rm -f /dev/shm/"$1":*; }
die() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# expect_rc WANT DESCRIPTION CMD...: runs CMD (stdout in $TMP/out, stderr in $TMP/err) and
# fails the test unless it exits WANT.
expect_rc() {
  local want=$1 what=$2 rc
  shift 2
  "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  [ "$rc" = "$want" ] || die "$what: exit $rc, want $want; stderr: $(cat "$TMP/err")"
}

# wait_file FILE SECONDS: poll until FILE exists and is non-empty (no sleeping guesses).
wait_file() {
  local f=$1 deadline=$((SECONDS + $2))
  while [ ! -s "$f" ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.05
  done
}

# exportd_port_wait LOG PID: waits (10 s) until the exporter PID, logging to LOG, listens; sets
# PORT to the port it printed. Dies, with the log, when it exits or does not start in time.
exportd_port_wait() {
  local log=$1 pid=$2 deadline=$((SECONDS + 10))
  until grep -q "listening on" "$log"; do
    [ $SECONDS -ge $deadline ] && die "exporter did not start: $(cat "$log")"
    kill -0 "$pid" 2>/dev/null || die "exporter died: $(cat "$log")"
    sleep 0.05
  done
  PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$log" | head -1)
}

# start_bg CMD...: runs CMD in the background; its pid goes to LAST_PID and is killed on exit.
start_bg() {
  "$@" &
  PIDS+=($!)
  LAST_PID=$!
}

# netns_pair PREFIX SUBNET: two network namespaces "$PREFIX-dev-$$" and "$PREFIX-cmp-$$" joined
# by a veth pair, SUBNET.1 on the device side and SUBNET.2 on the compute side (SUBNET like
# 169.254.77). Sets DEV and CMP; removed on exit. Skips (77) where namespaces cannot be made.
netns_pair() {
  local prefix=$1 subnet=$2
  [ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
  DEV=$prefix-dev-$$ CMP=$prefix-cmp-$$
  ip netns add "$DEV" 2>/dev/null || skip "cannot create network namespaces here"
  CLEANUPS+=("ip netns del $DEV")
  ip netns add "$CMP" || die "second namespace"
  CLEANUPS+=("ip netns del $CMP")
  ip link add "vd$$" netns "$DEV" type veth peer name "vc$$" netns "$CMP" || skip "cannot create a veth pair"
  ip -n "$DEV" addr add "$subnet.1/24" dev "vd$$"
  ip -n "$CMP" addr add "$subnet.2/24" dev "vc$$"
  ip -n "$DEV" link set lo up
  ip -n "$CMP" link set lo up
  ip -n "$DEV" link set "vd$$" up
  ip -n "$CMP" link set "vc$$" up
}

# stack_start BUILDDIR PREFIX SUBNET EXPORT...: the real stack of the mapped-BAR tests:
# rpcie-exportd (each EXPORT as --export, access log in $ACCESS) in one namespace and
# rpcie-hostd (a real FUSE mount at $MNT, device links in $DEVDIR) in the other, over TCP.
# The array EXPORTD_ARGS, if set, adds options to exportd's command line.
# hostd's --timeout is $HOSTD_TIMEOUT seconds (default 2; attaches have --attach-timeout, 10 s); the
# array HOSTD_ARGS, if set, adds options to hostd's command line. Its state file is
# $TMP/hostd-state.json (never the default under /run, which another test's hostd would restore).
# Sets EXPORTD EXPORTD_PID HOSTD HOSTD_PID RPCIE ON_DEV ON_CMP HOST MNT DEVDIR SOCK ACCESS, exports RPCIE_CONTROL,
# and makes die() show the daemons' logs. Skips without /dev/fuse or namespaces.
stack_start() {
  local b=$1 prefix=$2 subnet=$3
  shift 3
  [ -e /dev/fuse ] || skip "no /dev/fuse"
  netns_pair "$prefix" "$subnet"
  stack_daemons_start "$b" "$subnet" "$@"
}

# stack_daemons_start BUILDDIR SUBNET EXPORT...: stack_start's daemons, in namespaces $DEV
# (SUBNET.1) and $CMP (SUBNET.2) that the caller made and joined its own way.
stack_daemons_start() {
  local b=$1 subnet=$2 spec
  shift 2
  EXPORTD=$b/devexport/rpcie-exportd HOSTD=$b/frontend/rpcie-hostd RPCIE=$b/tools/rpcie
  [ -e /dev/fuse ] || skip "no /dev/fuse"
  ON_DEV=(nsenter --net="/run/netns/$DEV") ON_CMP=(nsenter --net="/run/netns/$CMP")
  HOST=$subnet.1 MNT=$TMP/mnt DEVDIR=$TMP/dev SOCK=$TMP/hostd.sock ACCESS=$TMP/access.log
  export RPCIE_CONTROL=$SOCK
  die() {
    echo "FAIL: $*" >&2
    stack_report
    exit 1
  }
  mkdir -p "$DEVDIR"
  "$RPCIE" keygen "$TMP/psk" >/dev/null || die "keygen"
  STACK_EXPORTS=()
  for spec in "$@"; do STACK_EXPORTS+=(--export "$spec"); done
  stack_exportd_start
  stack_hostd_start
  CLEANUPS+=("for _ in 1 2 3 4; do grep -q ' $MNT ' /proc/mounts && umount -l $MNT; done")
}

# stack_report: on stderr, the end of each daemon's log and where each of its threads waits
# (gdb, when installed): what a failure, and above all a hang, needs to be found.
stack_report() {
  local l p
  for l in hostd exportd; do [ -f "$TMP/$l.log" ] && { echo "--- $l.log" >&2; tail -n 25 "$TMP/$l.log" >&2; }; done
  command -v gdb >/dev/null || return 0
  for p in "${EXPORTD_PID:-}" "${HOSTD_PID:-}"; do
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null || continue
    echo "--- threads of $(cat "/proc/$p/comm" 2>/dev/null) ($p)" >&2
    timeout 60 gdb -p "$p" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(Thread|#)' >&2
  done
}

# stack_exportd_start: starts (again, after a kill) the stack's rpcie-exportd with the exports
# stack_daemons_start was given, and waits until it listens. Sets EXPORTD_PID.
stack_exportd_start() {
  local before deadline
  before=$(grep -c "listening on" "$TMP/exportd.log" 2>/dev/null)
  start_bg "${ON_DEV[@]}" "$EXPORTD" --listen "$HOST" --provider tcp --psk-file "$TMP/psk" "${STACK_EXPORTS[@]}" \
    --access-log "$ACCESS" ${EXPORTD_ARGS[@]+"${EXPORTD_ARGS[@]}"} 2>>"$TMP/exportd.log"
  EXPORTD_PID=$LAST_PID
  deadline=$((SECONDS + 10))
  until [ "$(grep -c "listening on" "$TMP/exportd.log" 2>/dev/null)" -gt "${before:-0}" ]; do
    [ $SECONDS -ge $deadline ] && die "exporter did not start"
    sleep 0.05
  done
}

# stack_hostd_start: starts (again, after a kill) the stack's rpcie-hostd and waits until its
# control socket answers. Sets HOSTD_PID.
stack_hostd_start() {
  local deadline
  start_bg "${ON_CMP[@]}" "$HOSTD" --foreground --mount "$MNT" --control "$SOCK" --dev-dir "$DEVDIR" \
    --psk-file "$TMP/psk" --provider tcp --timeout "${HOSTD_TIMEOUT:=2}" --state-file "$TMP/hostd-state.json" \
    ${HOSTD_ARGS[@]+"${HOSTD_ARGS[@]}"} \
    2>>"$TMP/hostd.log"
  HOSTD_PID=$LAST_PID
  deadline=$((SECONDS + 10))
  until "$RPCIE" status >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && die "hostd did not start"
    sleep 0.05
  done
}

# stack_attach EXPORT...: attaches each export of the stack, in order ($DEVDIR/rpcie0, 1, ...).
stack_attach() {
  local e
  for e in "$@"; do "${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e "$e" >/dev/null || die "attach $e"; done
}
