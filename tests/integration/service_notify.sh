#!/usr/bin/env bash
# Both daemons under a service manager's notify socket (sd_notify(3)) that this test listens
# on itself (notify_listen.py), on loopback (no namespaces): READY=1 only once the daemon
# serves, STATUS= with the right numbers, WATCHDOG=1 at half of WATCHDOG_USEC and none while
# the daemon is stopped, rpcie-exportd's reload on SIGHUP (an export added, a held one
# removed, a broken file; without --config, nothing), rpcie-hostd attaching a new [[attach]]
# entry of its --config file on SIGHUP, and
# STOPPING=1 with exit 0 on SIGTERM.
#
#   test ─ notify_listen.py (exportd.notify) ◄── READY/STATUS/WATCHDOG ── rpcie-exportd 127.0.0.1:PORT
#        └ notify_listen.py (hostd.notify)   ◄── READY/STATUS/WATCHDOG ── rpcie-hostd (FUSE at $TMP/mnt)
#                                                                         └── attaches edu0 over tcp
#   service_notify.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$(realpath "$1")
EXPORTD=$B/devexport/rpcie-exportd HOSTD=$B/frontend/rpcie-hostd RPCIE=$B/tools/rpcie
LISTEN="python3 $(dirname "$(realpath "$0")")/notify_listen.py"
command -v python3 >/dev/null || skip "python3 is not installed"
[ -e /dev/fuse ] || skip "no /dev/fuse"
[ "$(id -u)" = 0 ] || skip "needs root to mount FUSE with allow_other"
MNT=$TMP/mnt DEVDIR=$TMP/dev SOCK=$TMP/hostd.sock CONF=$TMP/exportd.toml
export RPCIE_CONTROL=$SOCK
die() {
  echo "FAIL: $*" >&2
  for l in hostd exportd; do
    [ -f "$TMP/$l.log" ] && { echo "--- $l.log" >&2; tail -n 20 "$TMP/$l.log" >&2; }
    [ -f "$TMP/$l.events" ] && { echo "--- $l.events (last)" >&2; tail -n 12 "$TMP/$l.events" >&2; }
  done
  exit 1
}
mkdir -p "$DEVDIR"
"$RPCIE" keygen "$TMP/psk" >/dev/null || die "keygen"

# events_count DAEMON PATTERN: how many notifications of DAEMON match PATTERN (grep -E).
events_count() { grep -cE -- "$2" "$TMP/$1.events" 2>/dev/null; }
# events_wait DAEMON PATTERN COUNT SECONDS: until COUNT notifications match.
events_wait() {
  local deadline=$((SECONDS + $4))
  until [ "$(events_count "$1" "$2")" -ge "$3" ]; do
    [ $SECONDS -ge $deadline ] && die "$1: no $3 notification(s) matching '$2' within $4 s"
    sleep 0.05
  done
}
# log_wait FILE PATTERN SECONDS: until FILE has a line matching PATTERN (grep).
log_wait() {
  local deadline=$((SECONDS + $3))
  until grep -q -- "$2" "$1" 2>/dev/null; do
    [ $SECONDS -ge $deadline ] && die "no '$2' in $1 within $3 s"
    sleep 0.05
  done
}
# listener_start DAEMON READY_CHECK [AFTER_CHECK]: the notify socket $TMP/DAEMON.notify and
# its reader, which runs READY_CHECK with the daemon frozen where it sent READY=1, then
# AFTER_CHECK with it running (notify_listen.py).
listener_start() {
  start_bg $LISTEN "$TMP/$1.notify" "$TMP/$1.events" "$2" "${3:-}"
  local deadline=$((SECONDS + 5))
  until [ -S "$TMP/$1.notify" ]; do
    [ $SECONDS -ge $deadline ] && die "the $1 notify listener did not start"
    sleep 0.05
  done
}
# notified CMD...: CMD with a 1 s watchdog that names it (WATCHDOG_PID is the shell that
# execs it: the daemon's own pid). NOTIFY_SOCKET is set by the caller.
notified() { start_bg env WATCHDOG_USEC=1000000 sh -c 'export WATCHDOG_PID=$$; exec "$0" "$@"' "$@"; }
# pings_within DAEMON SECONDS: WATCHDOG=1 notifications that arrive in the next SECONDS.
pings_within() {
  local before
  before=$(events_count "$1" 'WATCHDOG=1')
  sleep "$2"
  echo $(($(events_count "$1" 'WATCHDOG=1') - before))
}
# served DAEMON WHAT STATUS: its READY=1 came when WHAT held (the listener's check passed),
# its STATUS= line is STATUS, and it pings at least 3 times in 2.5 s (1 s watchdog).
served() {
  local n
  events_wait "$1" '^[0-9.]+ ready-check' 1 15
  ! grep 'ready-check' "$TMP/$1.events" | grep -qv 'rc=0$' || die "$1: READY=1 before $2"
  pass "$1: READY=1 once $2"
  events_wait "$1" "STATUS=$3" 1 5
  pass "$1: STATUS=$3"
  n=$(pings_within "$1" 2.5)
  [ "$n" -ge 3 ] || die "$1: $n WATCHDOG=1 in 2.5 s at WATCHDOG_USEC=1000000 (want at least 3)"
  pass "$1: $n WATCHDOG=1 in 2.5 s"
}
exports_config() {  # the exports of $CONF: each argument a NAME=BACKEND[:SIZE]
  local spec name backend
  : >"$CONF"
  for spec in "$@"; do
    name=${spec%%=*} backend=${spec#*=}
    printf '[[export]]\nname = "%s"\nbackend = "%s"\n' "$name" "${backend%%:*}" >>"$CONF"
    [ "$backend" != "${backend%%:*}" ] && printf '[export.params]\nsize = "%s"\n' "${backend#*:}" >>"$CONF"
  done
}
listed() { "$RPCIE" list -r "127.0.0.1:$PORT" --psk-file "$TMP/psk" 2>&1; }

# --- rpcie-exportd: ready once it listens -------------------------------------------------
exports_config edu0=edu mem0=membar:16M
# READY's check: the port the daemon printed takes a connection at that moment (the daemon
# frozen where it sent READY=1: the kernel completes the connection into the listen backlog).
listener_start exportd "port=\$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\)\$/\1/p' $TMP/exportd.log); \
  [ -n \"\$port\" ] && python3 -c 'import socket,sys; socket.create_connection((\"127.0.0.1\", int(sys.argv[1])), 1)' \$port"
NOTIFY_SOCKET=$TMP/exportd.notify notified "$EXPORTD" --config "$CONF" --listen 127.0.0.1:0 --provider tcp \
  --psk-file "$TMP/psk" 2>>"$TMP/exportd.log"
EXPORTD_PID=$LAST_PID
served exportd "the port it printed takes connections" "serving 2 exports, 0 attached"
PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$TMP/exportd.log")

# --- rpcie-hostd: ready once mounted and its control socket answers ----------------------
# READY's check: the mount is there and the control socket takes connections while hostd is
# frozen where it said ready; then (running) rpcie status answers.
listener_start hostd "grep -q ' $MNT ' /proc/mounts && python3 -c 'import socket,sys; \
  socket.socket(socket.AF_UNIX).connect(sys.argv[1])' '$SOCK'" "'$RPCIE' status --control '$SOCK'"
printf '# no [[attach]] entries yet: the SIGHUP check below adds one\n' >"$TMP/hostd.toml"
NOTIFY_SOCKET=$TMP/hostd.notify notified "$HOSTD" --config "$TMP/hostd.toml" --foreground --mount "$MNT" --control "$SOCK" \
  --dev-dir "$DEVDIR" --psk-file "$TMP/psk" --provider tcp --timeout 2 --state-file "$TMP/hostd-state.json" \
  2>>"$TMP/hostd.log"
HOSTD_PID=$LAST_PID
CLEANUPS+=("for _ in 1 2 3 4; do grep -q ' $MNT ' /proc/mounts && umount -l $MNT; done")
served hostd "$MNT is mounted and rpcie status answers" "0 devices attached"

# --- an attachment shows in both daemons' status -------------------------------------------
"$RPCIE" attach -r "127.0.0.1:$PORT" -e edu0 >/dev/null 2>"$TMP/err" || die "attach edu0: $(cat "$TMP/err")"
events_wait hostd 'STATUS=1 device attached' 1 5
events_wait exportd 'STATUS=serving 2 exports, 1 attached' 1 5
pass "attach: hostd STATUS=1 device attached, exportd STATUS=serving 2 exports, 1 attached"
edu_id() { dd if="$DEVDIR/rpcie0/resource0" bs=4 count=1 status=none | od -An -tx4 | tr -d ' '; }
[ "$(edu_id)" = 010000ed ] || die "edu0's ID register through hostd: '$(edu_id)'"

# --- exportd: SIGHUP with one export added and the held one removed ------------------------
exports_config mem0=membar:16M mem1=membar:8M
kill -HUP "$EXPORTD_PID"
events_wait exportd 'RELOADING=1' 1 5
events_wait exportd '^[0-9.]+ READY=1' 2 5
out=$(listed)
grep -q mem1 <<<"$out" || die "after the reload, mem1 is not listed: $out"
grep -q edu0 <<<"$out" || die "after the reload, edu0 (held) is gone already: $out"
[ "$(edu_id)" = 010000ed ] || die "edu0, removed but held, no longer answers: '$(edu_id)'"
"$RPCIE" attach -r "127.0.0.1:$PORT" -e edu0 >/dev/null 2>"$TMP/err" && die "a removed export took a new attach"
grep -q "removed from the configuration" "$TMP/err" || die "a removed export's refusal: $(cat "$TMP/err")"
kill -0 "$EXPORTD_PID" || die "exportd ended on SIGHUP"
pass "SIGHUP: RELOADING=1 then READY=1; mem1 listed; edu0, removed but attached, still served and refused to others"
events_wait exportd 'STATUS=serving 3 exports, 1 attached' 1 5
"$RPCIE" detach -d rpcie0 >/dev/null 2>"$TMP/err" || die "detach rpcie0: $(cat "$TMP/err")"
deadline=$((SECONDS + 10))
while grep -q edu0 <<<"$(listed)"; do
  [ $SECONDS -ge $deadline ] && die "edu0 still listed 10 s after its detach: $(listed)"
  sleep 0.1
done
events_wait exportd 'STATUS=serving 2 exports, 0 attached' 2 5
events_wait hostd 'STATUS=0 devices attached' 2 5
pass "detach: edu0 gone from the list; exportd STATUS=serving 2 exports, 0 attached; hostd STATUS=0 devices attached"

# --- exportd: SIGHUP with a broken file keeps what runs --------------------------------------
exports_config mem0=membar:16M mem1=membar:8M
printf '[[export]]\nname = "bad0"\nbackend = "edu"\nfrobnicate = 1\n' >>"$CONF"
bad_line=$(grep -n frobnicate "$CONF" | cut -d: -f1)
kill -HUP "$EXPORTD_PID"
events_wait exportd 'RELOADING=1' 2 5
events_wait exportd '^[0-9.]+ READY=1' 3 5
grep -q "refused.*$CONF:$bad_line: " "$TMP/exportd.log" ||
  die "the broken file's error (FILE:LINE $CONF:$bad_line) is not in the log"
out=$(listed)
grep -q mem0 <<<"$out" && grep -q mem1 <<<"$out" && ! grep -q bad0 <<<"$out" ||
  die "after a broken reload the exports changed: $out"
pass "SIGHUP with a broken file: '$CONF:$bad_line:' logged, RELOADING=1/READY=1, mem0 and mem1 still served"

# A client key that was not loaded at start cannot be allowed by a reload: a holder of the
# shared key could take its name.
"$RPCIE" keygen "$TMP/bob.psk" >/dev/null || die "keygen bob"
exports_config mem0=membar:16M mem1=membar:8M
printf '[[export]]\nname = "bob0"\nbackend = "edu"\nallow = ["bob"]\n' >>"$CONF"
printf '[[client]]\nname = "bob"\npsk-file = "%s"\n' "$TMP/bob.psk" >>"$CONF"
bad_line=$(grep -n 'allow = \["bob"\]' "$CONF" | cut -d: -f1)
kill -HUP "$EXPORTD_PID"
events_wait exportd '^[0-9.]+ READY=1' 4 5
grep -q "refused.*$CONF:$bad_line: export 'bob0': allow names client 'bob', whose key was not loaded" \
  "$TMP/exportd.log" || die "a reload allowing a client without a loaded key was not refused"
grep -q bob0 <<<"$(listed)" && die "bob0 was added though its client's key was not loaded"
pass "SIGHUP: an allow list naming a client whose key was not loaded at start is refused ($CONF:$bad_line)"

# --- hostd: SIGHUP attaches the configuration's new [[attach]] entries ---------------------
printf '[[attach]]\nhost = "127.0.0.1"\nport = %s\nexport = "mem1"\n' "$PORT" >>"$TMP/hostd.toml"
kill -HUP "$HOSTD_PID"
log_wait "$TMP/hostd.log" "SIGHUP: configuration reloaded, 1 new attach entry" 5
events_wait hostd 'STATUS=1 device attached' 2 10
"$RPCIE" status -o json 2>"$TMP/err" | grep -q '"export":"mem1"' || die "hostd after SIGHUP: mem1 not attached: $(cat "$TMP/err")"
kill -HUP "$HOSTD_PID"
log_wait "$TMP/hostd.log" "SIGHUP: configuration reloaded, 0 new attach entries" 5
pass "hostd: SIGHUP attached the [[attach]] entry added to its --config file (mem1), and not twice"

# --- a stopped daemon does not ping ----------------------------------------------------------
for d in exportd hostd; do
  pid_var=${d^^}_PID
  stop_wait "${!pid_var}" || die "$d did not stop"
  sleep 0.3  # a ping sent just before the stop is read by now
  n=$(pings_within "$d" 2)
  kill -CONT "${!pid_var}"
  [ "$n" = 0 ] || die "$d: $n WATCHDOG=1 while it was stopped"
  n=$(pings_within "$d" 1.5)
  [ "$n" -ge 1 ] || die "$d: no WATCHDOG=1 after SIGCONT"
  pass "$d: no WATCHDOG=1 in 2 s while stopped (SIGSTOP), pings again after SIGCONT"
done

# --- SIGTERM: STOPPING=1 and exit 0 -----------------------------------------------------------
for d in hostd exportd; do
  pid_var=${d^^}_PID
  kill -TERM "${!pid_var}"
  wait "${!pid_var}"
  rc=$?
  [ "$rc" = 0 ] || die "$d: exit $rc after SIGTERM"
  events_wait "$d" 'STOPPING=1' 1 5
  pass "$d: SIGTERM: STOPPING=1, exit 0"
done

# --- exportd without --config: SIGHUP has nothing to reload --------------------------------
start_bg "$EXPORTD" --listen 127.0.0.1:0 --provider tcp --psk-file "$TMP/psk" --export edu9=edu 2>>"$TMP/exportd2.log"
pid=$LAST_PID
log_wait "$TMP/exportd2.log" "serving 1 export" 10
kill -HUP $pid
log_wait "$TMP/exportd2.log" "nothing to reload (no --config)" 5
kill -0 $pid || die "exportd without --config ended on SIGHUP"
kill -TERM $pid
wait $pid || die "exportd without --config: exit $? after SIGTERM"
pass "exportd without --config: SIGHUP logged as nothing to reload, still running; SIGTERM exits 0"
