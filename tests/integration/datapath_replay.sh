#!/usr/bin/env bash
# Replayed data-path messages from inside the genuine fabric connection (issue 12 point 7;
# docs/security.md 5.3), with the real daemons (stack_daemons_start: rpcie-exportd and
# rpcie-hostd over tcp;ofi_rxm, a real FUSE mount) and a man in the middle made of namespaces:
#
#   [ns cmp: rpcie-hostd]             [ns rc]      [ns rd]             [ns dev: rpcie-exportd]
#    vc: SUBNET.2 =====veth=====  rc: SUBNET.1    rd: SUBNET.2 =====veth===== vd: SUBNET.1
#                                        '-- fabric_relay.py --'
#
# hostd's bootstrap connection, its fabric connection to the exporter's endpoint and any the
# exporter's endpoint opens back all end at the relay, which makes each again from the other
# side: each daemon sees the other's own address, and a message the relay sends again is a
# true replay (a copy of what the genuine peer sent, from its address, on its connection, at
# a message boundary). What is replayed, each after the operation named:
#  - d2c (exporter to hostd): a read_reply and an interrupt of edu0 (rpcie-edu-driver's run)
#    and, sealed, an rma_data chunk of a read of mem0's BAR0 through the FUSE file;
#  - c2d (hostd to exporter): the first and the last posted mmio_write of that run and,
#    sealed, an rma_put chunk of a write of "old" bytes to BAR0, replayed after a later write
#    of other bytes to the same place, and an rma_get; open: that write's one-sided RMA write,
#    and (d2c) the exporter's one-sided write of the driver's DMA into the window.
# The relay cannot decrypt: it picks each by direction, size and the operation around it.
# Sealed (the tcp default): every replay is refused as replayed and counted (hostd's
# messages_replayed in rpcie status; the exporter's in its log line at detach), the
# attachment goes on (generation 1), and nothing changed: BAR0's checksum, what the client
# reads, the interrupt count; rpcie-edu-driver passes. Open (--data-path open): its messages
# are sealed too, and the same replays of them are refused and counted just so; but bulk there
# is one-sided RMA, not messages: the replayed RMA write of the old bytes lands, and BAR0 holds
# them again (asserted, as the record of docs/security.md 5.3: open trusts the fabric).
#   datapath_replay.sh BUILDDIR [sealed|open]
if [ $# = 1 ]; then
  for phase in sealed open; do
    echo "=== phase $phase"
    bash "$0" "$1" "$phase" || exit $?
  done
  echo "PASS"
  exit 0
fi
. "$(dirname "$0")/lib.sh"
B=$1 PHASE=$2
DRIVER=$B/tools/edu-driver/rpcie-edu-driver RELAY=$(dirname "$0")/fabric_relay.py
command -v python3 >/dev/null || skip "python3 is not installed"
command -v sha256sum >/dev/null || skip "sha256sum is not installed"
case $PHASE in
  open) ATTACH_ARGS=(--data-path open) SPEC_PATH=,data-path=open ;;
  sealed) ATTACH_ARGS=() SPEC_PATH= ;;
  *) die "unknown phase $PHASE" ;;
esac
SUBNET=169.254.87
HOSTD_TIMEOUT=5

# --- the topology -------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
[ -e /dev/fuse ] || skip "no /dev/fuse"
DEV=rpcied-dev-$$ CMP=rpcied-cmp-$$ RC=rpcied-rc-$$ RD=rpcied-rd-$$
for ns in $DEV $CMP $RC $RD; do
  ip netns add "$ns" 2>/dev/null || skip "cannot create network namespaces here"
  CLEANUPS+=("ip netns del $ns")
  ip -n "$ns" link set lo up
done
ip link add "vc$$" netns "$CMP" type veth peer name "rc$$" netns "$RC" || skip "cannot create a veth pair"
ip link add "vd$$" netns "$DEV" type veth peer name "rd$$" netns "$RD" || skip "cannot create a veth pair"
for a in "$CMP vc$$ 2" "$RC rc$$ 1" "$DEV vd$$ 1" "$RD rd$$ 2"; do
  set -- $a
  ip -n "$1" addr add "$SUBNET.$3/24" dev "$2" && ip -n "$1" link set "$2" up || die "address $SUBNET.$3 in $1"
done

stack_daemons_start "$B" "$SUBNET" "mem0=membar,size=1M$SPEC_PATH" "edu0=edu$SPEC_PATH"
mkdir -p "$TMP/relay"
start_bg python3 "$RELAY" "/run/netns/$RC" "/run/netns/$RD" "$SUBNET.1" "$SUBNET.2" "$EXPORTD_PID" "$HOSTD_PID" \
  "$TMP/relay" 150 >"$TMP/relay.out" 2>&1
RELAY_PID=$LAST_PID
deadline=$((SECONDS + 5))
until grep -q "^listening" "$TMP/relay.out" 2>/dev/null; do
  [ $SECONDS -ge $deadline ] && die "the relay did not start: $(cat "$TMP/relay.out")"
  sleep 0.05
done
for e in mem0 edu0; do
  "${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e $e "${ATTACH_ARGS[@]}" >/dev/null || die "attach $e: $(cat "$TMP/relay.out")"
done
BAR=$DEVDIR/rpcie0/resource0 EDU=$DEVDIR/rpcie1
[ -e "$BAR" ] && [ -e "$EDU" ] || die "no $BAR or $EDU after attach"
grep -q "^data_path $PHASE$" "$DEVDIR/rpcie0/remote" || die "remote: $(cat "$DEVDIR/rpcie0/remote")"

# --- what the relay saw, and the operations whose messages are replayed ------------------------
MSGS=$TMP/relay/messages
count() { awk -v d="$1" '$1 == d { n++ } END { print n + 0 }' "$MSGS"; }  # count DIRECTION
# pick DIRECTION FROM TO MIN MAX OP first|last: the index of the first or last message of that
# direction, index in [FROM, TO), size in [MIN, MAX] and base-header op OP; empty if none.
pick() {
  awk -v d="$1" -v f="$2" -v t="$3" -v lo="$4" -v hi="$5" -v op="$6" -v w="$7" '
    $1 == d && $2 >= f && $2 < t && $4 >= lo && $4 <= hi && $5 == op { if (w == "last" || i == "") i = $2 }
    END { print i }' "$MSGS"
}
grep -q "^conn [0-9]*: fabric" "$TMP/relay.out" || die "no fabric connection through the relay: $(cat "$TMP/relay.out")"
head -c $((1 << 20)) /dev/urandom >"$TMP/old"
head -c $((1 << 20)) /dev/urandom >"$TMP/pattern"
P0=$(count c2d)
dd if="$TMP/old" of="$BAR" bs=1M count=1 conv=notrunc status=none || die "dd of the old bytes into BAR0"
P1=$(count c2d) R0=$(count d2c)
dd if="$BAR" of="$TMP/readback" bs=1M count=1 status=none || die "dd of BAR0"
R1=$(count d2c)
cmp -s "$TMP/old" "$TMP/readback" || die "the client reads back other bytes than it wrote"
dd if="$TMP/pattern" of="$BAR" bs=1M count=1 conv=notrunc status=none || die "dd of the pattern into BAR0"
G0=$(count c2d)
dd if="$BAR" of="$TMP/readback" bs=1M count=1 status=none || die "dd of BAR0"
G1=$(count c2d)
cmp -s "$TMP/pattern" "$TMP/readback" || die "the client reads back other bytes than it wrote"
E0=$(count c2d) F0=$(count d2c)
"$DRIVER" "$EDU" >"$TMP/driver.out" 2>"$TMP/driver.err" || die "edu driver: $(cat "$TMP/driver.err")"
E1=$(count c2d) F1=$(count d2c)
dd if="$BAR" bs=1M count=1 status=none | sha256sum >"$TMP/sum.before" || die "checksum of BAR0"
echo "$PHASE: relay: $(grep -c "^conn [0-9]*: fabric" "$TMP/relay.out") fabric connections, $(grep -c "^c2d" "$MSGS") messages hostd to exporter, $(grep -c "^d2c" "$MSGS") back"
grep "connection message" "$TMP/relay.out" | sed "s/^/$PHASE: relay: /"
echo "$PHASE: relay: messages by direction, size, op, flags, header size: $(awk '{ print $1 "/" $4 "/" $5 "/" $6 "/" $7 }' "$MSGS" | sort | uniq -c | sort -rn | awk '{ printf "%s x%d, ", $2, $1 }')"
# Sealed messages have consecutive sequences per direction and connection (the relay reads them
# in clear at the start of the rpcie message). A message of the bare 16-byte header is tcp's
# acknowledgement of a delivery-complete write (memory-BAR writes, the device's DMA into the
# window), not an rpcie message: it has no sequence ("-").
awk '$5 == 0 && $9 != "-" { k = $1 " " $3; if (k in last && $9 != last[k] + 1) { print "gap", $0; bad = 1 } last[k] = $9 }
     END { exit bad }' "$MSGS" || die "messages' sequences are not consecutive: $(head -3 "$TMP/relay.out")"

status_json() { "${ON_CMP[@]}" "$RPCIE" status -o json; }
# counters: "REPLAYED REFUSED INTERRUPTS GENERATIONS STATES" summed over the attachments
counters() {
  status_json | python3 -c '
import json, sys
a = json.load(sys.stdin)["attachments"]
c = [x["counters"] for x in a]
print(sum(x["messages_replayed"] for x in c), sum(x["messages_refused"] for x in c), sum(x["interrupts"] for x in c),
      ",".join(str(x["generation"]) for x in a), ",".join(x["state"] for x in a))'
}
BEFORE=$(counters) || die "status"
set -- $BEFORE
[ "$1 $2 $4 $5" = "0 0 1,1 connected,connected" ] || die "before the replays: replayed refused irqs gens states = $BEFORE"
IRQS=$3

# --- the replays ---------------------------------------------------------------------------------
N=0 WANT_D2C=0 WANT_C2D=0
# replay DIRECTION INDEX WHAT: the relay sends message INDEX of DIRECTION again.
replay() {
  [ -n "$2" ] || die "$PHASE: no message to replay as $3 (see $MSGS)"
  N=$((N + 1))
  echo "$1 $2" >"$TMP/relay/cmd.$N"
  wait_file "$TMP/relay/done.$N" 5 || die "the relay did not replay $3"
  grep -q "^replayed" "$TMP/relay/done.$N" || die "the relay: $(cat "$TMP/relay/done.$N")"
  echo "$PHASE: $3: $(cat "$TMP/relay/done.$N")"
  if [ "$(awk -v d="$1" -v i="$2" '$1 == d && $2 == i { print $5 }' "$MSGS")" = 0 ]; then
    [ "$1" = d2c ] && WANT_D2C=$((WANT_D2C + 1)) || WANT_C2D=$((WANT_C2D + 1))
  fi
}
# Sizes: 16 (tcp base header) + 64 (rxm header) + 8 (the seal's sequence) + 24 (rpcie header)
# + the payload (docs/protocol.md 4.x) + 16 (the seal's tag): a read_reply is 140 bytes, an
# interrupt 138, an mmio_write 146, an rma_get 148; bulk chunks are the largest.
replay d2c "$(pick d2c "$F0" "$F1" 140 140 0 last)" "a read_reply to edu0's driver"
replay d2c "$(pick d2c "$F0" "$F1" 138 138 0 last)" "an interrupt of edu0 (factorial)"
replay c2d "$(pick c2d "$E0" "$E1" 146 146 0 first)" "edu0's first posted mmio_write"
replay c2d "$(pick c2d "$E0" "$E1" 146 146 0 last)" "edu0's last posted mmio_write"
if [ "$PHASE" = sealed ]; then
  replay c2d "$(pick c2d "$P0" "$P1" 8000 100000 0 first)" "an rma_put chunk of the old bytes"
  replay d2c "$(pick d2c "$R0" "$R1" 8000 100000 0 first)" "an rma_data chunk of the old bytes"
  replay c2d "$(pick c2d "$G0" "$G1" 148 148 0 last)" "an rma_get of BAR0"
else
  replay c2d "$(pick c2d "$P0" "$P1" 8000 $((2 << 20)) 4 first)" "the one-sided RMA write of the old bytes"
  # The exporter's write of the driver's device-to-RAM DMA into the window (4 KiB and its
  # header): the same bytes land again. Were it delivery-complete, hostd's acknowledgement of
  # the replay would crash the exporter's tcp provider (docs/security.md 5.3).
  replay d2c "$(pick d2c "$F0" "$F1" 4096 8192 4 last)" "the exporter's one-sided write of edu0's DMA into the window"
fi

# --- afterwards ------------------------------------------------------------------------------------
# hostd drops what it receives as it polls; its reads make it poll now (the exporter's data
# threads poll all the time).
dd if="$BAR" of="$TMP/readback" bs=1M count=1 status=none || die "$PHASE: dd of BAR0 after the replays"
head -c 4 "$EDU/config" >/dev/null || die "$PHASE: edu0's config space after the replays"
deadline=$((SECONDS + 5))
until set -- $(counters) && [ "$1" = "$WANT_D2C" ]; do
  [ $SECONDS -ge $deadline ] && die "$PHASE: hostd counts $1 replayed messages, want $WANT_D2C (status: $(counters))"
  sleep 0.1
done
[ "$2" = "$1" ] || die "$PHASE: hostd refused $2 messages but $1 as replayed: every refusal should be a replay"
[ "$3" = "$IRQS" ] || die "$PHASE: $3 interrupts after the replays, $IRQS before"
[ "$4 $5" = "1,1 connected,connected" ] || die "$PHASE: after the replays: generations $4, states $5"
pass "$PHASE: hostd refused the $WANT_D2C replayed messages from the exporter, each counted as replayed; interrupts still $IRQS; both attachments connected, generation 1"
dd if="$BAR" bs=1M count=1 status=none | sha256sum >"$TMP/sum.after" || die "checksum of BAR0 after the replays"
if [ "$PHASE" = sealed ]; then
  cmp -s "$TMP/pattern" "$TMP/readback" || die "sealed: the client reads other bytes after the replays"
  cmp -s "$TMP/sum.before" "$TMP/sum.after" || die "sealed: BAR0 changed during the replays"
  pass "sealed: BAR0 checksum $(cut -c1-16 "$TMP/sum.after") and what the client reads (its pattern) unchanged"
elif cmp -s "$TMP/old" "$TMP/readback"; then
  echo "open: the replayed RMA write landed: BAR0 holds the old bytes again (checksum $(cut -c1-16 "$TMP/sum.after"))"
  OPEN_RMA=landed
elif cmp -s "$TMP/pattern" "$TMP/readback"; then
  echo "open: BAR0 unchanged by the replayed RMA write"
  OPEN_RMA=refused
else
  die "open: BAR0 holds neither the pattern nor the old bytes after the replays"
fi
"$DRIVER" "$EDU" >"$TMP/driver.out" 2>"$TMP/driver.err" || die "$PHASE: edu driver after the replays: $(cat "$TMP/driver.err")"
pass "$PHASE: rpcie-edu-driver (identity, factorial by interrupt, DMA) passes after the replays"
for d in rpcie0 rpcie1; do "${ON_CMP[@]}" "$RPCIE" detach -d $d >/dev/null || die "detach $d"; done
kill -0 "$RELAY_PID" 2>/dev/null || die "$PHASE: the relay stopped: $(tail -3 "$TMP/relay.out")"
# The exporter's record: one line per attachment at its end.
deadline=$((SECONDS + 5))
until [ "$(grep -c "data-path messages refused" "$TMP/exportd.log")" = 2 ]; do
  [ $SECONDS -ge $deadline ] && die "$PHASE: the exporter logged no refusals line for each attachment"
  sleep 0.05
done
set -- $(awk '/data-path messages refused/ { f += $(NF-5); g += $(NF-3); r += $(NF-1) } END { print f + 0, g + 0, r + 0 }' "$TMP/exportd.log")
[ "$1 $2 $3" = "0 0 $WANT_C2D" ] || die "$PHASE: the exporter refused $1 foreign, $2 forged, $3 replayed; want 0 0 $WANT_C2D"
pass "$PHASE: the exporter refused the $WANT_C2D replayed messages from hostd, each counted as replayed (its log at detach)"
if [ "$PHASE" = open ]; then
  # docs/security.md 5.2: open trusts the fabric; one-sided RMA has no seal to refuse a replay.
  [ "$OPEN_RMA" = landed ] || die "open: the replayed RMA write did not land (docs/security.md 5.3 says it does)"
fi
echo "PASS $PHASE"
