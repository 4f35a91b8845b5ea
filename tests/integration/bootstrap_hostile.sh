#!/usr/bin/env bash
# Hostile bootstrap peers get a clean error and the server keeps serving the others.
#   bootstrap_hostile.sh SELFTEST
#
#   garbage | huge length | truncated frame | hang-up | bad hello | stalled handshake
#          \________________________ [selftest serve] ________________________/
#                                          ^ meanwhile a good client completes
. "$(dirname "$0")/lib.sh"
SELFTEST=$1
SESSIONS=7
start_bg "$SELFTEST" serve --listen 127.0.0.1:0 --sessions $SESSIONS --port-file "$TMP/port" \
  --provider tcp --handshake-timeout 3 2>"$TMP/server.log"
server=$LAST_PID
wait_file "$TMP/port" 10 || die "server did not start"
PORT=$(cat "$TMP/port")

send_raw() {  # send_raw PRINTF-FORMAT: one connection, these bytes, then hang up
  exec 3<>"/dev/tcp/127.0.0.1/$PORT" || die "connect"
  printf "$1" >&3
  exec 3>&-
}
send_raw 'this is not an rpcie frame at all, just text\n'
send_raw '\xff\xff\xff\xff'                      # length prefix far over the cap
send_raw '\x64\x00\x00\x00RPCI\x01\x01'         # promises 100 bytes, sends 6, hangs up
send_raw ''                                      # connects and hangs up at once
# A well-formed frame whose hello is inconsistent (header says 4 payload bytes, frame has 0).
send_raw '\x18\x00\x00\x00RPCI\x01\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
# A peer that connects and says nothing: its handshake deadline runs while others are served.
exec 4<>"/dev/tcp/127.0.0.1/$PORT" || die "connect"
CLEANUPS+=("exec 4>&-")

kill -0 "$server" 2>/dev/null || die "server died after hostile peers"
start=$SECONDS
timeout 30 "$SELFTEST" connect -r "127.0.0.1:$PORT" --provider tcp -o json --size 1M >"$TMP/out" \
  || die "good client failed next to hostile ones: $(cat "$TMP/out")"
grep -q '"ok":true' "$TMP/out" || die "good client checks failed"
[ $((SECONDS - start)) -lt 3 ] || die "good client was held up by the stalled peer"
# The stalled peer is cut off by its own handshake deadline, not by hanging up.
timeout 20 tail --pid="$server" -f /dev/null || die "server did not finish"
wait "$server" || die "server exited with an error"
cat "$TMP/server.log" >&2
grep -q 'deadline passed' "$TMP/server.log" || die "stalled handshake did not time out"
grep -q 'exceeds the cap' "$TMP/server.log" || die "oversized frame not reported"
grep -q '7 sessions, 1 completed cleanly' "$TMP/server.log" || die "server summary wrong"
pass "server survived 6 hostile peers and served the good one"
