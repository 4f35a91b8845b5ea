#!/usr/bin/env bash
# A stalled exporter and hostd's watchdog (issue 13 point 3), with the real stack:
#
#   netns rpcies-dev-PID                      netns rpcies-cmp-PID
#   ┌──────────────────────────┐  veth/tcp   ┌────────────────────────────────────┐
#   │ rpcie-exportd            │<───────────>│ rpcie-hostd --timeout 2 (FUSE $MNT) │
#   │  edu0=edu                │  169.254.81 │  rpcie0 = edu0, rpcie1 = mem0      │
#   │  mem0=membar,doorbell=on │             │  RPCIE_HOSTD_TEST_STALL=$TMP/stall │
#   └──────────────────────────┘             └────────────────────────────────────┘
#        ^ SIGSTOP / SIGCONT                     ^ programs: hostd_stall.py, dd
#
# - stopped 2 s (< lease 5 s): the request past its deadline gets EIO at 1.8..3 s, alone; the
#   next request, sent while the exporter is still stopped, gets its own answer (not the late
#   one) once it resumes; same attachment (generation 1, no loss), memory BAR intact.
# - stopped 14 s (> lease): EIO at the deadline, the attachment outlives that request; a
#   heartbeat finds no echo (lease .. 4/3 lease), the resume finds no exporter for a lease and
#   the attachment ends; back as generation 2, a fresh device.
# - a request stalled inside hostd past its deadline (the RPCIE_HOSTD_TEST_STALL hook): only
#   the watchdog can answer it, with EIO at timeout .. timeout + 0.4 s; nothing answers twice.
#   hostd_stall.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$1
STALL="python3 $(dirname "$0")/hostd_stall.py"
CHECK="python3 $(dirname "$0")/hostd_check.py"
TIMEOUT_S=2 LEASE_S=5
export RPCIE_HOSTD_TEST_STALL=$TMP/stall
HOSTD_TIMEOUT=$TIMEOUT_S
stack_start "$B" rpcies 169.254.81 edu0=edu mem0=membar,size=16M,doorbell=on
stack_attach edu0 mem0
E=$DEVDIR/rpcie0 M=$DEVDIR/rpcie1
# status_of DEVICE FIELD: a field of rpcie status -o json.
status_of() {
  "$RPCIE" status -o json | python3 -c "import json,sys; print({a['device']: a for a in json.load(sys.stdin)['attachments']}['$1']$2)"
}
# The exporter's own view of mem0 (its doorbell hashes BAR0): a pattern written now must
# survive a short stall and be gone (a fresh device) after a long one.
PATTERN=$TMP/pattern
head -c $((16 << 20)) /dev/urandom >"$PATTERN"
dd if="$PATTERN" of="$M/resource0" bs=1M conv=notrunc,fsync status=none || die "membar write"
# mem_same: the BAR as read after drop_caches and a reopen equals the pattern.
mem_same() {
  sync
  echo 1 >/proc/sys/vm/drop_caches
  cmp -s "$PATTERN" <(dd if="$M/resource0" bs=1M count=16 status=none)
}
mem_same || die "membar does not hold the pattern before the stall"

# --- stopped 2 s: one request fails alone ------------------------------------------------
$STALL short "$E" "$EXPORTD_PID" "$TIMEOUT_S" 2 >"$TMP/short" 2>&1 || die "short stall: $(cat "$TMP/short")"
cat "$TMP/short"
[ "$(status_of rpcie0 "['generation']") $(status_of rpcie0 "['losses']")" = "1 0" ] ||
  die "after a 2 s stall: generation/losses $(status_of rpcie0 "['generation'], ['losses']")"
[ "$(status_of rpcie0 "['counters']['messages_refused']")" = 0 ] ||
  die "the late reply was counted as refused (a forgery), not dropped as late"
grep -q "lost (" "$TMP/hostd.log" && die "a 2 s stall ended an attachment: $(grep 'lost (' "$TMP/hostd.log")"
mem_same || die "membar lost its contents in a 2 s stall"
$CHECK liveness "$E" >/dev/null || die "edu after a 2 s stall"
pass "exporter stopped 2 s (< lease $LEASE_S s): EIO alone, the next request its own answer, attachment and memory kept"

# --- stopped 14 s: the heartbeats find the link lost, the resume gives up -----------------
# Longer than the time the client takes to find the loss (at most 4/3 of a lease) and to try
# to resume (a lease more): the exporter cannot answer the resume, and the attachment ends.
$STALL long "$E" "$EXPORTD_PID" "$TIMEOUT_S" 14 "$LEASE_S" >"$TMP/long" 2>&1 || die "long stall: $(cat "$TMP/long")"
cat "$TMP/long"
grep -q "rpcie0: edu0 on .* lost (.*exporter lost (heartbeat)" "$TMP/hostd.log" ||
  die "the link did not end by the heartbeats: $(grep 'lost (' "$TMP/hostd.log")"
deadline=$((SECONDS + 20))  # the exporter continues at 14 s; the reconnect backs off to 2 s
until grep -q "^generation 2" "$E/remote" && grep -q "^state connected" "$E/remote" &&
  grep -q "^generation 2" "$M/remote" && grep -q "^state connected" "$M/remote"; do
  [ $SECONDS -ge $deadline ] && die "no reconnect after the exporter resumed: $(cat "$E/remote" "$M/remote")"
  sleep 0.1
done
[ "$(status_of rpcie0 "['losses']")" = 1 ] || die "losses after a 14 s stall: $(status_of rpcie0 "['losses']")"
$CHECK liveness "$E" >/dev/null || die "edu after the reconnect"
mem_same && die "membar still holds the pattern after its lease lapsed (not a fresh device)"
cmp -s <(head -c $((16 << 20)) /dev/zero) <(dd if="$M/resource0" bs=1M count=16 status=none) ||
  die "membar after the lease lapsed is not the zeroed power-on memory"
pass "exporter stopped 14 s (> lease + the resume's lease): EIO at the deadline, link lost by the heartbeats, not resumed, back as a fresh device"

# --- the watchdog --------------------------------------------------------------------------
before=$(grep -c "request older than the timeout" "$TMP/hostd.log")
$STALL watchdog "$E" "$RPCIE_HOSTD_TEST_STALL" "$TIMEOUT_S" 4 >"$TMP/watchdog" 2>&1 ||
  die "watchdog: $(cat "$TMP/watchdog")"
cat "$TMP/watchdog"
[ $(($(grep -c "request older than the timeout" "$TMP/hostd.log") - before)) = 1 ] ||
  die "the watchdog should have answered exactly one request: $(grep 'older than' "$TMP/hostd.log")"
kill -0 "$HOSTD_PID" || die "hostd died after the watchdog answered"
grep -q "^generation 2" "$E/remote" && grep -q "^state connected" "$E/remote" ||
  die "the watchdog's request changed the attachment: $(cat "$E/remote")"
pass "watchdog: a request stalled past its deadline gets EIO from the watchdog, once; the attachment stays"
