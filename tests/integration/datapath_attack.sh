#!/usr/bin/env bash
# The data path against an observer and a keyless injector (issue 12 point 2; docs/security.md
# 4.1, 4.2), with the real stack (stack_start: rpcie-exportd and rpcie-hostd in two network
# namespaces over tcp;ofi_rxm, a real FUSE mount):
#  - an observer of the bootstrap connection (bootstrap_tap.py, a relay that records both
#    directions) sees hello and hello_ack only inside sealed_hello, and neither side's fabric
#    address anywhere in the bytes;
#  - a keyless endpoint of its own (rpcie-test-fabric-inject) sends hostd's attachment forged
#    replies for request ids 1..N, errors for posted writes and interrupts with counts near
#    2^64-1: every one is refused and counted (messages_refused in rpcie status), and the
#    device keeps answering with its own values: rpcie-edu-driver's identity, factorial by
#    interrupt and DMA checks pass afterwards.
#   datapath_attack.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$1
INJECT=$B/tests/rpcie-test-fabric-inject DRIVER=$B/tools/edu-driver/rpcie-edu-driver
TAP=$(dirname "$0")/bootstrap_tap.py
command -v python3 >/dev/null || skip "python3 is not installed"
command -v ss >/dev/null || skip "ss (iproute2) is not installed"

HOSTD_TIMEOUT=5
SUBNET=169.254.84
stack_start "$B" rpcied "$SUBNET" edu0=edu

# The observer: a relay on a second address of the compute side's veth (not loopback: hostd
# binds its fabric endpoint to the bootstrap socket's local address, which the device side
# must reach).
TAP_IP=$SUBNET.3 TAP_PORT=17385
ip -n "$CMP" addr add "$TAP_IP/24" dev "vc$$" || die "second address for the tap"
mkdir -p "$TMP/tap"
start_bg "${ON_CMP[@]}" python3 "$TAP" relay "$TAP_IP" "$TAP_PORT" "$HOST" 7385 "$TMP/tap" >"$TMP/tap.out"
wait_file "$TMP/tap.out" 5 || die "the tap did not start"
deadline=$((SECONDS + 5))
until grep -q listening "$TMP/tap.out"; do
  [ $SECONDS -ge $deadline ] && die "the tap did not listen"
  sleep 0.05
done

"${ON_CMP[@]}" "$RPCIE" attach -r "$TAP_IP:$TAP_PORT" -e edu0 >/dev/null || die "attach through the tap"
DEVICE=$DEVDIR/rpcie0
[ -e "$DEVICE" ] || die "no $DEVICE after attach"

# --- what the observer saw ------------------------------------------------------------------
ls "$TMP"/tap/*.c2s >/dev/null 2>&1 || die "the tap recorded nothing"
types() {  # types SUFFIX: the frame types of every recorded connection in that direction
  local f out=
  for f in "$TMP"/tap/*."$1"; do out+=$(python3 "$TAP" frames "$f") || return 1; out+=$'\n'; done
  echo $out
}
C2S=$(types c2s) || die "client frames do not parse"
S2C=$(types s2c) || die "exporter frames do not parse"
# 1 hello, 2 hello_ack, 26 sealed_hello (docs/protocol.md)
for t in $C2S $S2C; do [ "$t" = 1 ] || [ "$t" = 2 ] && die "a hello in clear: client sent [$C2S], exporter [$S2C]"; done
[[ " $C2S " == *" 26 "* ]] && [[ " $S2C " == *" 26 "* ]] || die "no sealed_hello each way: client [$C2S], exporter [$S2C]"
pass "hello and hello_ack travel only inside sealed_hello (client frames: $C2S; exporter: $S2C)"

# Each side's fabric address as libfabric's tcp provider names it: a sockaddr_in (family 2
# little-endian, port and address in network order), as hello would carry it in clear.
listeners() {  # listeners NETNS PID: the IP:PORT of each TCP listener of PID
  ip netns exec "$1" ss -Hltnp | awk -v p="pid=$2," 'index($0, p) { print $4 }'
}
sockaddr_hex() {  # sockaddr_hex IP:PORT
  python3 -c 'import socket,struct,sys; ip,port=sys.argv[1].rsplit(":",1); print((struct.pack("<H",2)+struct.pack(">H",int(port))+socket.inet_aton(ip)).hex())' "$1"
}
EXPORTD_PID=$(pgrep -f "rpcie-exportd --listen $HOST" | head -1)
[ -n "$EXPORTD_PID" ] || die "no exporter pid"
DEV_EP=$(listeners "$DEV" "$EXPORTD_PID" | grep -v ":7385$" | head -1)
CMP_EP=$(listeners "$CMP" "$HOSTD_PID" | head -1)
[ -n "$DEV_EP" ] && [ -n "$CMP_EP" ] || die "fabric endpoints not found (exporter '$DEV_EP', hostd '$CMP_EP')"
for ep in "$DEV_EP" "$CMP_EP"; do
  hex=$(sockaddr_hex "$ep")
  for f in "$TMP"/tap/*; do
    python3 -c 'import sys; sys.exit(0 if bytes.fromhex(sys.argv[2]) in open(sys.argv[1], "rb").read() else 1)' "$f" "$hex"
    case $? in
      0) die "fabric address $ep ($hex) in clear in $(basename "$f")" ;;
      1) ;;
      *) die "cannot search $f" ;;
    esac
  done
done
pass "neither fabric address ($DEV_EP, $CMP_EP) appears in the bootstrap bytes"

# --- a keyless injector -----------------------------------------------------------------------
refused() { "${ON_CMP[@]}" "$RPCIE" status -o json | python3 -c 'import json,sys; print(sum(a["counters"]["messages_refused"] for a in json.load(sys.stdin)["attachments"]))'; }
[ "$(refused)" = 0 ] || die "messages_refused is $(refused) before any attack"
COUNT=250
"${ON_DEV[@]}" "$INJECT" "$HOST" "${CMP_EP%:*}" "${CMP_EP##*:}" $COUNT >"$TMP/inject.out" 2>"$TMP/inject.err" ||
  die "injector failed: $(cat "$TMP/inject.err")"
[ "$(cat "$TMP/inject.out")" = "sent $((COUNT * 4))" ] || die "injector: $(cat "$TMP/inject.out")"
# hostd drops them as it polls; a register read makes it poll now.
"$DRIVER" "$DEVICE" >"$TMP/driver.out" 2>"$TMP/driver.err" || die "edu driver after the attack: $(cat "$TMP/driver.err")"
deadline=$((SECONDS + 10))
until [ "$(refused)" = $((COUNT * 4)) ]; do
  [ $SECONDS -ge $deadline ] && die "messages_refused is $(refused), want $((COUNT * 4))"
  sleep 0.1
done
pass "$((COUNT * 4)) forged replies, posted-write errors and interrupts refused and counted"
grep -q "^identify   pass .*ID register 0x010000ed" "$TMP/driver.out" && grep -q "^factorial  pass    12! = 479001600 after interrupt" "$TMP/driver.out" || die "driver output: $(cat "$TMP/driver.out")"
"$DRIVER" "$DEVICE" >"$TMP/driver.out" 2>"$TMP/driver.err" || die "edu driver, second run: $(cat "$TMP/driver.err")"
pass "the device answers with its own values and its interrupts arrive (rpcie-edu-driver passes twice)"
"${ON_CMP[@]}" "$RPCIE" detach -d rpcie0 >/dev/null || die "detach"
[ ! -e "$DEVICE" ] || die "$DEVICE still there after detach"
echo "PASS"
