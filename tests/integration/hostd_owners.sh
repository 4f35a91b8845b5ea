#!/usr/bin/env bash
# rpcie-hostd's control socket between users (issue 12 point 6; docs/security.md 4.4): a real
# rpcie-exportd and rpcie-hostd (stack_start: two network namespaces, a real FUSE mount) and
# two real users in hostd's --group. Who attached what is recorded; another user can neither
# detach nor see the details of it, nor attach the export it holds; root can. Attach requests
# with a DMA window over --max-dma-window, or with host or export names that are not names,
# are refused before anything is allocated or created.
#   hostd_owners.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$1
command -v python3 >/dev/null || skip "python3 is not installed"
for tool in runuser strace; do
  if ! command -v $tool >/dev/null; then
    [ "${CI:-}" = true ] && die "$tool is not installed (scripts/deps)"
    skip "$tool is not installed"
  fi
done

# Two users in a group of their own (removed on exit). Under CI a failure here is a failure.
GROUP=rpcieo$$ UA=rpcieoa$$ UB=rpcieob$$
users_make() {
  groupadd "$GROUP" || return 1
  CLEANUPS+=("groupdel $GROUP")
  for u in "$UA" "$UB"; do
    useradd -M -N -g "$GROUP" -s /bin/false "$u" || return 1
    CLEANUPS+=("userdel $u")
  done
}
if ! users_make 2>"$TMP/useradd.err"; then
  [ "${CI:-}" = true ] && die "cannot create the test users: $(cat "$TMP/useradd.err")"
  skip "cannot create users here: $(cat "$TMP/useradd.err")"
fi
UID_A=$(id -u "$UA") UID_B=$(id -u "$UB")
chmod 755 "$TMP"  # the users walk through it to the control socket

HOSTD_TIMEOUT=5  # operations under load (four builds on two cores) take more than the default 2 s
HOSTD_ARGS=(--group "$GROUP" --mode 0660 --max-dma-window 64M --allow-remote 169.254.83.1)
stack_start "$B" rpcieo 169.254.83 edu0=edu edu1=edu mem0=membar,size=1M,shared=yes
[ "$(cat /proc/"$HOSTD_PID"/comm)" = rpcie-hostd ] || die "HOSTD_PID $HOSTD_PID is not hostd"

# as USER CMD...: CMD as USER (root for "root"), stdout in $TMP/out, stderr in $TMP/err; its
# exit status is RC.
as() {
  local who=$1
  shift
  if [ "$who" = root ]; then "$@" >"$TMP/out" 2>"$TMP/err"; else runuser -u "$who" -- "$@" >"$TMP/out" 2>"$TMP/err"; fi
  RC=$?
}
cli() { as "$1" "$RPCIE" "${@:2}" --control "$SOCK"; }
# raw USER JSON: one request on the control socket as USER; the answer line in $TMP/out.
raw() {
  as "$1" python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
data = b""
while not data.endswith(b"\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode().strip())' "$SOCK" "$2"
}
# jq-like: jget FILTER < JSON (python expression on `j`)
jget() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
expect_answer() {  # expect_answer WHAT ERRNO MESSAGE (from $TMP/out of raw)
  local got_errno got_msg
  got_errno=$(jget "j.get('errno')" <"$TMP/out") got_msg=$(jget "j.get('error')" <"$TMP/out")
  [ "$got_errno" = "$2" ] && [ "$got_msg" = "$3" ] || die "$1: answer $(cat "$TMP/out"), want errno $2 '$3'"
}

# --- a user outside the group cannot use the socket at all ---------------------------------
cli nobody status
[ $RC = 1 ] && [ "$(cat "$TMP/err")" = "rpcie: error: no access to $SOCK (root or the group rpcie-hostd was given)" ] || die "nobody: status rc $RC, $(cat "$TMP/err")"
pass "a user outside --group: the control socket is refused"

# --- who attached what ----------------------------------------------------------------------
cli "$UA" attach -r "$HOST" -e edu0 -o json
[ $RC = 0 ] || die "A attach edu0: $(cat "$TMP/err")"
[ "$(jget "j['device']" <"$TMP/out")" = rpcie0 ] || die "A's device: $(cat "$TMP/out")"
D0=$(jget "j['sysfs']" <"$TMP/out")
cli "$UB" attach -r "$HOST" -e edu1 -o json
[ $RC = 0 ] && [ "$(jget "j['device']" <"$TMP/out")" = rpcie1 ] || die "B attach edu1: $(cat "$TMP/out" "$TMP/err")"

# B cannot detach A's device: exact errno and message, and the device stays.
MSG_DETACH="rpcie0 was attached by another user (uid $UID_A); only that user or root may detach it"
cli "$UB" detach -d rpcie0
[ $RC = 1 ] && [ "$(cat "$TMP/err")" = "rpcie: error: $MSG_DETACH" ] || die "B detach rpcie0: rc $RC, $(cat "$TMP/err")"
raw "$UB" '{"op":"detach","device":"rpcie0"}'
expect_answer "B detach rpcie0 (raw)" 1 "$MSG_DETACH"
[ -e "$D0/config" ] && [ "$(readlink "$DEVDIR/rpcie0")" = "$D0" ] || die "rpcie0 is gone after B's refused detach"
id=$(dd if="$D0/resource0" bs=4 count=1 status=none | od -An -tx4 | tr -d ' ')
[ "$id" = 010000ed ] || die "A's device after B's refused detach: edu ID '$id'"
pass "user B cannot detach user A's rpcie0 (EPERM, '$MSG_DETACH'); it stays attached"

# B's status: its own with details, A's only as a hidden entry.
cli "$UB" status -o json
[ $RC = 0 ] || die "B status: $(cat "$TMP/err")"
[ "$(jget "[a for a in j['attachments'] if a['device'] == 'rpcie0']" <"$TMP/out")" = "[{'device': 'rpcie0', 'hidden': True}]" ] ||
  die "B sees rpcie0 as $(cat "$TMP/out")"
[ "$(jget "[(a['export'], a['uid'], a['state']) for a in j['attachments'] if a['device'] == 'rpcie1']" <"$TMP/out")" = \
  "[('edu1', $UID_B, 'connected')]" ] || die "B's own rpcie1: $(cat "$TMP/out")"
grep -q edu0 "$TMP/out" && die "B's status names A's export: $(cat "$TMP/out")"
cli "$UB" status
grep -qx "rpcie0   (another user's attachment; details hidden)" "$TMP/out" && ! grep -q edu0 "$TMP/out" ||
  die "B's text status: $(cat "$TMP/out")"
cli "$UA" status -o json
[ "$(jget "[(a['device'], a.get('export'), a.get('hidden', False)) for a in j['attachments']]" <"$TMP/out")" = \
  "[('rpcie0', 'edu0', False), ('rpcie1', None, True)]" ] || die "A's status: $(cat "$TMP/out")"
cli root status -o json
[ "$(jget "[(a['device'], a['export'], a['uid']) for a in j['attachments']]" <"$TMP/out")" = \
  "[('rpcie0', 'edu0', $UID_A), ('rpcie1', 'edu1', $UID_B)]" ] || die "root's status: $(cat "$TMP/out")"
pass "status: each user sees details of their own attachments only, root sees all with their uid"

# An export another user holds (a shared one, which the exporter itself would let in twice).
cli "$UA" attach -r "$HOST" -e mem0 -o json
[ $RC = 0 ] && [ "$(jget "j['device']" <"$TMP/out")" = rpcie2 ] || die "A attach mem0: $(cat "$TMP/out" "$TMP/err")"
LINK="$DEVDIR/rpcie/by-export/$HOST/mem0"
LINK_BEFORE=$(readlink "$LINK")
raw "$UB" "{\"op\":\"attach\",\"host\":\"$HOST\",\"export\":\"mem0\"}"
expect_answer "B attach of A's mem0" 1 \
  "export 'mem0' on $HOST:7385 is attached by another user (rpcie2); only that user or root may attach it again"
[ "$(readlink "$LINK")" = "$LINK_BEFORE" ] || die "B's refused attach moved A's by-export link"
[ ! -e "$DEVDIR/rpcie3" ] || die "B's refused attach left rpcie3"
# A non-root user only attaches from --allow-remote exporters; root from any.
raw "$UB" "{\"op\":\"attach\",\"host\":\"$HOST\",\"port\":7386,\"export\":\"edu0\"}"
expect_answer "B attach outside --allow-remote" 1 \
  "$HOST:7386 is not an exporter this hostd lets non-root users attach from (--allow-remote)"
raw root "{\"op\":\"attach\",\"host\":\"$HOST\",\"port\":7386,\"export\":\"edu0\"}"
[ "$(jget "j.get('errno')" <"$TMP/out")" != 1 ] && grep -q '"error"' "$TMP/out" ||
  die "root attach from a port nobody serves: $(cat "$TMP/out")"
pass "B cannot attach the export A holds, nor from an exporter outside --allow-remote (EPERM); A's link unchanged"

# detach --all as B: B's own only; A's kept.
cli "$UB" detach --all -o json
[ $RC = 0 ] && [ "$(jget "(j['detached'], j['kept'])" <"$TMP/out")" = "(['rpcie1'], 2)" ] ||
  die "B detach --all: $(cat "$TMP/out" "$TMP/err")"
[ -e "$D0/config" ] && [ -L "$DEVDIR/rpcie2" ] && [ ! -e "$DEVDIR/rpcie1" ] || die "B's detach --all touched A's devices"
# Root may do anything: attach the export A holds (shared), detach A's devices.
cli root attach -r "$HOST" -e mem0 -o json
[ $RC = 0 ] || die "root attach of mem0 beside A: $(cat "$TMP/err")"
ROOT_DEV=$(jget "j['device']" <"$TMP/out")
cli root detach -d "$ROOT_DEV"
[ $RC = 0 ] || die "root detach $ROOT_DEV: $(cat "$TMP/err")"
cli "$UA" detach -d rpcie2
[ $RC = 0 ] && [ ! -e "$LINK" ] || die "A detach rpcie2: rc $RC, $(cat "$TMP/err"), link $(readlink "$LINK")"
cli root detach -d rpcie0
[ $RC = 0 ] && [ "$(cat "$TMP/out")" = "detached rpcie0" ] && [ ! -e "$D0" ] || die "root detach of A's rpcie0: $(cat "$TMP/out" "$TMP/err")"
pass "detach --all as B detaches B's only (kept 2); root attaches beside A and detaches A's device"

# --- --max-dma-window: refused before anything is allocated ---------------------------------
# hostd is traced (strace -p) through the refused requests and then one at the cap: the
# refused ones must not create, size or map a window; the one at the cap shows that the
# trace would see it.
shm_count() { find /dev/shm -maxdepth 1 -name "rpcie-dma-$HOSTD_PID-*" | wc -l; }
kib() { awk -v k="$1:" '$1 == k { print $2 }' /proc/"$HOSTD_PID"/status; }
attaches() { grep -c "accepted\\|attach" "$TMP/exportd.log"; }  # connections and attaches seen
traced() {  # every thread of hostd has a tracer
  local t
  for t in /proc/"$HOSTD_PID"/task/*; do grep -q "^TracerPid:[[:space:]]*[1-9]" "$t/status" || return 1; done
}
strace -f -qq -e trace=openat,ftruncate,fallocate,mmap -o "$TMP/window.st" -p "$HOSTD_PID" 2>"$TMP/strace.err" &
TRACER=$!
deadline=$((SECONDS + 10))
until traced; do
  [ $SECONDS -ge $deadline ] && die "strace did not attach to hostd: $(cat "$TMP/strace.err")"
  sleep 0.05
done
shm0=$(shm_count) rss0=$(kib RssShmem) ex0=$(attaches) dev0=$(find "$DEVDIR" | wc -l)
for bytes in 67112960 1099511627776; do  # 64M + 4K, 1T
  raw "$UA" "{\"op\":\"attach\",\"host\":\"$HOST\",\"export\":\"edu0\",\"dma_window\":$bytes}"
  expect_answer "dma_window $bytes" 22 "dma_window of $bytes bytes is over --max-dma-window (67108864 bytes)"
done
cli "$UA" attach -r "$HOST" -e edu0 --dma-window 128M
[ $RC = 1 ] && [ "$(cat "$TMP/err")" = "rpcie: error: dma_window of 134217728 bytes is over --max-dma-window (67108864 bytes)" ] ||
  die "CLI attach with a 128M window: rc $RC, $(cat "$TMP/err")"
grep -E "rpcie-dma-|ftruncate|fallocate" "$TMP/window.st" && die "a refused window was created or sized (trace above)"
grep -E "mmap\(NULL, (67112960|1099511627776|134217728), PROT_READ\|PROT_WRITE, MAP_SHARED" "$TMP/window.st" &&
  die "a refused window was mapped"
[ "$(shm_count)" = "$shm0" ] || die "a refused window left $(($(shm_count) - shm0)) files in /dev/shm"
[ "$(kib RssShmem)" -le $((rss0 + 1024)) ] || die "hostd's shared memory grew from $rss0 to $(kib RssShmem) KiB"
[ "$(attaches)" = "$ex0" ] || die "a refused window reached the exporter: $(tail -n 3 "$TMP/exportd.log")"
[ "$(find "$DEVDIR" | wc -l)" = "$dev0" ] || die "a refused window left links: $(find "$DEVDIR")"
raw "$UA" "{\"op\":\"attach\",\"host\":\"$HOST\",\"export\":\"edu0\",\"dma_window\":67108864}"
[ "$(jget "j['device']" <"$TMP/out")" = rpcie0 ] || die "a window at the cap: $(cat "$TMP/out")"
kill -INT "$TRACER" && wait "$TRACER" 2>/dev/null
grep -q "rpcie-dma-$HOSTD_PID-rpcie0-.*O_CREAT" "$TMP/window.st" && grep -q "ftruncate(.*67108864" "$TMP/window.st" ||
  die "the trace did not see the window at the cap being made: $(grep -c . "$TMP/window.st") lines"
[ "$(stat -L -c %s "$DEVDIR/rpcie0/dma")" = 67108864 ] || die "window at the cap: $(stat -L -c %s "$DEVDIR/rpcie0/dma")"
cli "$UA" detach -d rpcie0
pass "dma_window over --max-dma-window: EINVAL naming the cap; traced: no window created, sized or mapped, no exporter call; at the cap it works"

# --- names that would become paths ------------------------------------------------------------
before=$(find "$DEVDIR" "$TMP" -maxdepth 4 | sort) ex0=$(attaches)
RULE_E='use 1-64 of A-Z a-z 0-9 _ . - (not "." or "..")'
for e in '../../x' '..' '.' 'a/b' '' 'a\nb'; do
  raw "$UA" "{\"op\":\"attach\",\"host\":\"$HOST\",\"export\":\"$e\"}"
  shown=${e//\\n/\\x0a}
  expect_answer "export '$e'" 22 "export name '$shown': $RULE_E"
done
RULE_H='expected an IPv4 or IPv6 address or a host name (labels of A-Z a-z 0-9 _ -)'
for h in '../../x' '..' 'a/b' '' 'h\u0000x'; do
  raw "$UA" "{\"op\":\"attach\",\"host\":\"$h\",\"export\":\"edu0\"}"
  shown=${h//\\u0000/\\x00}
  expect_answer "host '$h'" 22 "host '$shown': $RULE_H"
done
cli "$UA" attach -r "$HOST" -e ../../x
[ $RC = 1 ] && [ "$(cat "$TMP/err")" = "rpcie: error: export name '../../x': $RULE_E" ] ||
  die "CLI attach of ../../x: rc $RC, $(cat "$TMP/err")"
[ "$(find "$DEVDIR" "$TMP" -maxdepth 4 | sort)" = "$before" ] || die "a refused name created files: $(find "$DEVDIR")"
[ "$(attaches)" = "$ex0" ] || die "a refused name reached the exporter"
pass "host and export names with ../, /, NUL, newline, empty, . and .. refused (EINVAL) before any path or connection"
kill -0 "$HOSTD_PID" || die "hostd died"
