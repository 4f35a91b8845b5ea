#!/usr/bin/env bash
# One-sided RMA against the data path from an attacker that watched a real attach (issue 12
# point 7; docs/security.md 5.2), with the real stack (stack_start, tcp;ofi_rxm):
#
#   [ns dev: rpcie-exportd, mem0=membar edu0=edu]==veth==[ns cmp: rpcie-hostd, FUSE mount]
#        |  rma_capture.py (AF_PACKET on the veth) records a bulk transfer (dd of mem0's
#        |  resource0) and edu0's DMA to and from the client's DMA window (rpcie-edu-driver)
#        |  rpcie-test-fabric-inject rma: a keyless endpoint of its own, bound on the device
#        '  side, tries 8-byte reads (and where they work writes) with the captured keys
#
# Two phases, each its own stack (this script runs itself once per phase):
#  - open: RMA on registered memory, its keys in clear on the wire. The capture must find at
#    least one key and the attacker must read with it; what succeeded is printed (the
#    isolated-fabric contract of 5.2: an observer reads and writes the region behind a key).
#  - sealed (the tcp default): no RMA operation on the wire at all and no memory registered
#    for remote access. Every attempt, with the look-alike candidates of the capture, guessed
#    table keys 0..16 and random keys, against both sides' endpoints, must fail; the device
#    memory (sha256 of BAR0 through the client) and the client's own data are unchanged;
#    status says sealed.
#   datapath_rma_attack.sh BUILDDIR [open|sealed]
if [ $# = 1 ]; then
  for phase in open sealed; do
    echo "=== phase $phase"
    bash "$0" "$1" "$phase" || exit $?
  done
  echo "PASS"
  exit 0
fi
. "$(dirname "$0")/lib.sh"
B=$1 PHASE=$2
INJECT=$B/tests/rpcie-test-fabric-inject DRIVER=$B/tools/edu-driver/rpcie-edu-driver CAPTURE=$(dirname "$0")/rma_capture.py
command -v python3 >/dev/null || skip "python3 is not installed"
command -v ss >/dev/null || skip "ss (iproute2) is not installed"
command -v sha256sum >/dev/null || skip "sha256sum is not installed"
case $PHASE in
  open) ATTACH_ARGS=(--data-path open) SPEC_PATH=,data-path=open ;;
  sealed) ATTACH_ARGS=() SPEC_PATH= ;;
  *) die "unknown phase $PHASE" ;;
esac
SIZE=$((16 << 20))  # the largest region: the DMA window (BAR0 of mem0 is 4 MiB)

HOSTD_TIMEOUT=5
stack_start "$B" rpcier 169.254.86 "mem0=membar,size=4M$SPEC_PATH" "edu0=edu$SPEC_PATH"
for e in mem0 edu0; do
  "${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e $e "${ATTACH_ARGS[@]}" >/dev/null || die "attach $e"
done
DEVICE=$DEVDIR/rpcie0 BAR=$DEVDIR/rpcie0/resource0 EDU=$DEVDIR/rpcie1
[ -e "$BAR" ] && [ -e "$EDU" ] || die "no $BAR or $EDU after attach"
for d in "$DEVICE" "$EDU"; do grep -q "^data_path $PHASE$" "$d/remote" || die "remote: $(cat "$d/remote")"; done
data_path_all() {  # data_path_all MODE: every attachment in rpcie status -o json runs MODE
  "$RPCIE" status -o json | python3 -c '
import json, sys
a = json.load(sys.stdin)["attachments"]
assert len(a) == 2 and all(x["data_path"] == sys.argv[1] for x in a), a' "$1"
}
data_path_all "$PHASE" || die "status JSON data_path is not $PHASE"
pass "$PHASE: attached, remote and status JSON say data_path $PHASE"

# --- the capture of a bulk transfer -----------------------------------------------------------
head -c $((1 << 20)) /dev/urandom >"$TMP/pattern"
start_bg "${ON_DEV[@]}" python3 "$CAPTURE" capture "vd$$" "$TMP/stop" "$TMP/cap" 30 >"$TMP/capture.out"
CAPTURE_PID=$LAST_PID
deadline=$((SECONDS + 5))
until grep -q capturing "$TMP/capture.out" 2>/dev/null; do
  [ $SECONDS -ge $deadline ] && die "the capture did not start"
  sleep 0.05
done
dd if="$TMP/pattern" of="$BAR" bs=1M count=1 conv=notrunc status=none || die "dd of the pattern into BAR0"
dd if="$BAR" of="$TMP/readback" bs=1M count=1 status=none || die "dd of BAR0"
cmp -s "$TMP/pattern" "$TMP/readback" || die "the client reads back other bytes than it wrote"
"$DRIVER" "$EDU" >"$TMP/driver.out" 2>"$TMP/driver.err" || die "edu driver: $(cat "$TMP/driver.err")"
dd if="$BAR" bs=1M count=4 status=none | sha256sum >"$TMP/sum.before" || die "checksum of BAR0"
touch "$TMP/stop"
wait "$CAPTURE_PID" || die "the capture failed: $(cat "$TMP/capture.out")"
grep "^captured" "$TMP/capture.out" | sed "s/^/$PHASE: /"
[ -n "${KEEP_CAPTURE:-}" ] && cp "$TMP/cap" "$KEEP_CAPTURE.$PHASE"
python3 "$CAPTURE" keys "$TMP/cap" $SIZE 64 "$TMP/ops" >"$TMP/keys" 2>"$TMP/keys.err" || die "key scan: $(cat "$TMP/keys.err")"
FOUND=$(wc -l <"$TMP/keys")
set -- $(cat "$TMP/keys.err")  # flows N bytes B rma-headers H framed-keys F loose-keys L
[ "$#" = 10 ] && [ "$5" = rma-headers ] || die "key scan said: $(cat "$TMP/keys.err")"
HEADERS=$6 FRAMED=$8
echo "$PHASE: $(cat "$TMP/keys.err"): $FOUND candidate keys: $(tr '\n' ' ' <"$TMP/keys")"

# --- the attack -------------------------------------------------------------------------------
listeners() {  # listeners NETNS PID: the IP:PORT of each TCP listener of PID
  ip netns exec "$1" ss -Hltnp | awk -v p="pid=$2," 'index($0, p) { print $4 }'
}
EXPORTD_PID=$(pgrep -f "rpcie-exportd --listen $HOST" | head -1)
[ -n "$EXPORTD_PID" ] || die "no exporter pid"
TARGETS=$(listeners "$DEV" "$EXPORTD_PID" | grep -v ":7385$"; listeners "$CMP" "$HOSTD_PID")
[ -n "$(listeners "$DEV" "$EXPORTD_PID" | grep -v ":7385$")" ] && [ -n "$(listeners "$CMP" "$HOSTD_PID")" ] ||
  die "fabric endpoints not found: $TARGETS"
cp "$TMP/keys" "$TMP/tries"
if [ "$PHASE" = sealed ]; then
  for k in $(seq 0 16); do echo "$k 0"; done >>"$TMP/tries"
  for _ in 1 2 3 4; do echo "$(od -An -N8 -tu8 /dev/urandom | tr -d ' ') 0"; done >>"$TMP/tries"
fi
READS=0 WRITES=0 TRIED=0 REFUSED=0
for ep in $TARGETS; do
  "${ON_DEV[@]}" "$INJECT" rma "$HOST" "${ep%:*}" "${ep##*:}" "$TMP/tries" $SIZE >"$TMP/rma.out" 2>"$TMP/rma.err" ||
    die "attacker against $ep failed: $(cat "$TMP/rma.err")"
  summary=$(grep "^summary" "$TMP/rma.out") || die "attacker against $ep: no summary: $(cat "$TMP/rma.out")"
  echo "$PHASE: against $ep: $summary"
  grep -E "^(read-ok|write-ok|write-lost)" "$TMP/rma.out" | sed "s/^/$PHASE:   $ep /"
  echo "$PHASE:   $ep refusals by error: $(awk '/^refused/ { print $4 }' "$TMP/rma.out" | sort | uniq -c | tr -s ' \n' ' ')"
  set -- $summary
  [ "$3" = "$(wc -l <"$TMP/tries")" ] || die "attacker against $ep tried $3 of $(wc -l <"$TMP/tries") candidates: $summary"
  TRIED=$((TRIED + $3)) READS=$((READS + $5)) WRITES=$((WRITES + $7)) REFUSED=$((REFUSED + $9))
done

if [ "$PHASE" = open ]; then
  [ "$FRAMED" -ge 1 ] || die "open: the capture found no RMA operation's key ($HEADERS RMA headers)"
  [ "$READS" -ge 1 ] || die "open: no RMA read succeeded with $FOUND captured keys"
  pass "open: $HEADERS RMA operations and $FRAMED distinct keys in the capture; of $TRIED attempts $READS reads and $WRITES writes succeeded (docs/security.md 5.2)"
else
  # No RMA may travel at all: no region is registered, and the sealed RMA chunks
  # (Channel::sealed_chunk) fit ofi_rxm's eager buffers, so rxm never fetches one by a
  # rendezvous: an RMA read of the sender's buffer of ciphertext under a key the provider
  # chose, which 60 KiB chunks in rxm's default 16 KiB buffers did (found by this test).
  [ "$HEADERS" = 0 ] || die "sealed: $HEADERS RMA operations on the wire: $(sort "$TMP/ops" | uniq -c | head)"
  pass "sealed: no RMA operation on the wire at all ($FOUND look-alike candidates tried anyway)"
  [ "$READS" = 0 ] && [ "$WRITES" = 0 ] && [ "$REFUSED" = "$TRIED" ] || die "sealed: $READS reads and $WRITES writes of $TRIED succeeded"
  pass "sealed: all $TRIED attempts refused ($FOUND captured candidates, keys 0..16 and 4 random; $(echo $TARGETS | wc -w) fabric endpoints of both sides)"
fi

# --- the device and the client afterwards -----------------------------------------------------
dd if="$BAR" bs=1M count=4 status=none | sha256sum >"$TMP/sum.after" || die "checksum of BAR0 after the attack"
dd if="$BAR" of="$TMP/readback" bs=1M count=1 status=none || die "dd of BAR0 after the attack"
if [ "$PHASE" = sealed ]; then
  cmp -s "$TMP/sum.before" "$TMP/sum.after" || die "sealed: BAR0 changed during the attack"
  cmp -s "$TMP/pattern" "$TMP/readback" || die "sealed: the client's data changed during the attack"
  data_path_all sealed || die "status JSON data_path after the attack"
  "$DRIVER" "$EDU" >"$TMP/driver.out" 2>"$TMP/driver.err" || die "sealed: edu driver after the attack: $(cat "$TMP/driver.err")"
  pass "sealed: rpcie-edu-driver (identity, interrupts, DMA) passes after the attack"
  pass "sealed: BAR0 checksum $(cut -c1-16 "$TMP/sum.after") and the client's pattern unchanged, status still sealed"
else
  cmp -s "$TMP/sum.before" "$TMP/sum.after" && echo "open: BAR0 checksum unchanged (the attacker restored what it wrote)" ||
    echo "open: BAR0 checksum changed by the attack"
fi
for d in rpcie0 rpcie1; do "${ON_CMP[@]}" "$RPCIE" detach -d $d >/dev/null || die "detach $d"; done
echo "PASS $PHASE"
