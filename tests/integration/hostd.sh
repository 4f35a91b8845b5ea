#!/usr/bin/env bash
# rpcie-hostd end to end: rpcie-exportd in one network namespace, rpcie-hostd (a real FUSE
# mount) in another, joined by a veth pair (tcp;ofi_rxm); lspci/setpci/dd/python as users.
#   hostd.sh BUILDDIR
# hostd runs under `nsenter --net` (not `ip netns exec`, which would give it a private mount
# namespace and hide the mount from everyone else).
. "$(dirname "$0")/lib.sh"
B=$1
EXPORTD=$B/devexport/rpcie-exportd HOSTD=$B/frontend/rpcie-hostd RPCIE=$B/tools/rpcie
DRIVER=$B/tools/edu-driver/rpcie-edu-driver
CHECK="python3 $(dirname "$0")/hostd_check.py"
[ -e /dev/fuse ] || skip "no /dev/fuse"
command -v python3 >/dev/null || skip "python3 is not installed"
netns_pair rpcieh 169.254.79
ON_DEV=(nsenter --net="/run/netns/$DEV") ON_CMP=(nsenter --net="/run/netns/$CMP")
HOST=169.254.79.1
MNT=$TMP/mnt DEVDIR=$TMP/dev SOCK=$TMP/hostd.sock
export RPCIE_CONTROL=$SOCK
TIMEOUT_S=2
# Attaches under ThreadSanitizer on a loaded machine took over 2 s.
ATTACH_TIMEOUT_S=4
# On failure, the daemons' last words too.
die() {
  echo "FAIL: $*" >&2
  for l in hostd exportd; do [ -f "$TMP/$l.log" ] && { echo "--- $l.log" >&2; tail -n 25 "$TMP/$l.log" >&2; }; done
  exit 1
}
mkdir -p "$DEVDIR"
chmod 755 "$TMP"  # the unprivileged user below walks through it

# A group and a user in it, for the non-root check (removed on exit).
GROUP=rpcie$$ USER_NAME=rpcieu$$
if groupadd "$GROUP" 2>"$TMP/groupadd.err"; then
  CLEANUPS+=("groupdel $GROUP")
  useradd -M -N -g "$GROUP" -s /bin/false "$USER_NAME" || die "useradd $USER_NAME"
  CLEANUPS+=("userdel $USER_NAME")
else
  skip_check "cannot create a group here ($(cat "$TMP/groupadd.err")): the non-root user check"
  GROUP=0 USER_NAME=
fi

"$RPCIE" keygen "$TMP/psk" >/dev/null || die "keygen"
exportd_start() {
  start_bg "${ON_DEV[@]}" "$EXPORTD" --listen "$HOST" --provider tcp --psk-file "$TMP/psk" --export edu0=edu \
    --export edu1=edu,dma=mirror --export mem0=membar,size=64M,doorbell=on 2>>"$TMP/exportd.log"
  EXPORTER=$LAST_PID
  local deadline=$((SECONDS + 10))
  until grep -q "listening on" "$TMP/exportd.log" 2>/dev/null && [ "$(grep -c 'listening on' "$TMP/exportd.log")" -ge "$1" ]; do
    [ $SECONDS -ge $deadline ] && die "exporter did not start: $(cat "$TMP/exportd.log")"
    sleep 0.05
  done
}
hostd_start() {
  start_bg "${ON_CMP[@]}" "$HOSTD" --foreground --mount "$MNT" --control "$SOCK" --dev-dir "$DEVDIR" \
    --psk-file "$TMP/psk" --provider tcp --timeout "$TIMEOUT_S" --attach-timeout "$ATTACH_TIMEOUT_S" \
    --group "$GROUP" --mode 0660 \
    --state-file "$TMP/hostd-state.json" "$@" 2>>"$TMP/hostd.log"
  HOSTD_PID=$LAST_PID
  local deadline=$((SECONDS + 10))
  until "$RPCIE" status >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && die "hostd did not start: $(cat "$TMP/hostd.log")"
    sleep 0.05
  done
}
CLEANUPS+=("for _ in 1 2 3 4; do grep -q ' $MNT ' /proc/mounts && umount -l $MNT; done")
attach() {
  local e=$1
  shift
  "${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e "$e" -o json "$@"
}
json_get() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# --- CLI and daemon misuse -------------------------------------------------------------
for args in "attach" "attach -r $HOST" "detach" "detach -d rpcie0 --all" "status --bogus" "frobnicate" \
            "attach -r $HOST -e x --dma-window lots" "attach -r $HOST -e x --data-path clear"; do
  "$RPCIE" $args >/dev/null 2>"$TMP/err"; rc=$?
  [ $rc = 2 ] || die "rpcie $args: exit $rc, expected 2 ($(cat "$TMP/err"))"
done
"$RPCIE" status >/dev/null 2>"$TMP/err"; rc=$?
[ $rc = 1 ] && grep -q "rpcie: error: no rpcie-hostd listens" "$TMP/err" || die "status without hostd: rc $rc, $(cat "$TMP/err")"
for args in "--timeout soon" "--attach-timeout 0" "--dma-window 3" "--mode 999" "--group no-such-group-$$" "--bogus" "--max-dma-window 3" \
            "--dma-window 512M" "--max-dma-window 8M" "--allow-remote a/b" "--allow-remote [::1" "--data-path clear" \
            "--splice-writes maybe"; do
  "$HOSTD" --foreground --mount "$MNT" --control "$SOCK" --psk-file "$TMP/psk" --state-file "$TMP/hostd-state.json" \
    $args >/dev/null 2>"$TMP/err"; rc=$?
  [ $rc = 2 ] || die "rpcie-hostd $args: exit $rc, expected 2 ($(cat "$TMP/err"))"
done
pass "CLI and daemon misuse: usage errors, exit 2"

# Memory-BAR writes reach hostd two ways (rpcie-hostd(8), TUNING): spliced where a pipe
# holds a FUSE request (--splice-writes on, the default), else out of libfuse's buffer. This
# hostd splices; the one restarted after the SIGKILL below finds its pipes too small and
# copies (hostd_config.sh checks --splice-writes off); the membar check runs under each.
PIPE_MAX=$(cat /proc/sys/fs/pipe-max-size)
CLEANUPS+=("echo $PIPE_MAX >/proc/sys/fs/pipe-max-size")
echo 2097152 >/proc/sys/fs/pipe-max-size || die "cannot raise fs.pipe-max-size"
exportd_start 1
hostd_start
out=$(attach nosuch 2>&1); rc=$?
[ $rc = 1 ] && grep -q "rpcie: error:.*nosuch" <<<"$out" || die "attach of an unknown export: rc $rc, $out"
J0=$(attach edu0) || die "attach edu0"
J1=$(attach edu1 --data-path open) || die "attach edu1 (open data path)"
JM=$(attach mem0) || die "attach mem0"
D0=$(json_get "['sysfs']" <<<"$J0") D1=$(json_get "['sysfs']" <<<"$J1") DM=$(json_get "['sysfs']" <<<"$JM")
N0=$(json_get "['device']" <<<"$J0")
[ "$N0" = rpcie0 ] && [ "$(json_get "['path']" <<<"$J0")" = "$DEVDIR/rpcie0" ] || die "attach answer: $J0"
[ "$(readlink "$DEVDIR/rpcie0")" = "$D0" ] || die "/dev link rpcie0 -> $(readlink "$DEVDIR/rpcie0"), expected $D0"
[ "$(readlink "$DEVDIR/rpcie/by-export/$HOST/edu1")" = "$D1" ] || die "by-export link of edu1"
[ "$(cat "$D0/vendor") $(cat "$D0/device") $(cat "$D0/class")" = "0x1234 0x11e8 0x00ff00" ] || die "sysfs text files"
[ "$(wc -l <"$D0/resource")" = 7 ] || die "resource has $(wc -l <"$D0/resource") lines"
[ "$(stat -c %s "$D0/dma")" -gt 0 ] && [ "$(stat -L -c %s "$D0/dma")" = $((16 << 20)) ] || die "dma link / window size"
grep -q "^state connected" "$D0/remote" && grep -q "^generation 1" "$D0/remote" || die "remote: $(cat "$D0/remote")"
# The data path: tcp's default (sealed) unless the attach asked for one.
grep -q "^data_path sealed$" "$D0/remote" || die "remote of edu0 (tcp default): $(cat "$D0/remote")"
grep -q "^data_path open$" "$D1/remote" || die "remote of edu1 (attached --data-path open): $(cat "$D1/remote")"
"$RPCIE" status -o json | python3 -c '
import json, sys
a = {x["export"]: x for x in json.load(sys.stdin)["attachments"]}
assert (a["edu0"]["data_path"], a["edu1"]["data_path"]) == ("sealed", "open"), a' || die "status JSON data_path"
"$RPCIE" status | grep -q " edu1 .* open  " || die "status text: no data path column: $("$RPCIE" status)"
pass "attach: tree, /dev links, sysfs files, remote, data path"

# --- rpcie status: every field of an attachment, and counters that move -----------------------
# status_check DEVICE STATE GENERATION LOSSES: the JSON and the text line of DEVICE (edu0);
# its mmio_reads, mmio_writes and interrupts go to $TMP/status.counts.
status_check() {
  "$RPCIE" status -o json >"$TMP/status.json" || die "status -o json"
  python3 - "$TMP/status.json" "$1" "$DEVDIR" "$MNT" "$HOST" "$2" "$3" "$4" >"$TMP/status.out" <<'PY' || die "status JSON: $(cat "$TMP/status.json")"
import json, sys
path, dev, devdir, mnt, host, state, gen, losses = sys.argv[1:]
a = {x["device"]: x for x in json.load(open(path))["attachments"]}
x = a[dev]
assert x["path"] == devdir + "/" + dev and x["sysfs"].startswith(mnt + "/pci/devices/"), x
assert x["exporter"].startswith(host + ":") and x["export"] == "edu0", x
assert x["state"] == state and x["generation"] == int(gen) and x["losses"] == int(losses), x
assert x["provider"] == "tcp;ofi_rxm" and x["data_path"] == "sealed" and x["dma_window"] == 16 << 20, x
assert x["dma"].startswith("/dev/shm/rpcie-dma-") and x["id"] == "1234:11e8" and x["uid"] == 0, x
c = x["counters"]
for k in ("config_reads", "config_writes", "mmio_reads", "mmio_writes", "bar_bytes_read", "bar_bytes_written",
          "posted_write_errors", "messages_refused", "interrupts"):
    assert isinstance(c[k], int) and c[k] >= 0, (k, c)
assert (state == "connected") == ("error" not in x), x  # why, exactly while not connected
assert c["posted_write_errors"] == 0 and c["messages_refused"] == 0, c
print(c["mmio_reads"], c["mmio_writes"], c["interrupts"])
PY
  mv "$TMP/status.out" "$TMP/status.counts"
  "$RPCIE" status >"$TMP/status.txt" || die "status"
  head -n 1 "$TMP/status.txt" | grep -Eq "^DEVICE +EXPORTER +EXPORT +STATE +PROVIDER +DATAPATH +GEN +RESUMED +MMIO_RD +MMIO_WR +IRQS$" ||
    die "status text header: $(head -n 1 "$TMP/status.txt")"
  grep -Eq "^$1 +$HOST:[0-9]+ +edu0 +$2 +tcp;ofi_rxm +sealed +$3 +0 +[0-9]+ +[0-9]+ +[0-9]+$" "$TMP/status.txt" ||
    die "status text line of $1: $(cat "$TMP/status.txt")"
}
status_check rpcie0 connected 1 0
read -r rd0 wr0 _ <"$TMP/status.counts"
for _ in 1 2 3; do dd if="$D0/resource0" bs=4 count=1 status=none >/dev/null || die "dd for the counters"; done
printf '\x78\x56\x34\x12' | dd of="$D0/resource0" bs=4 seek=1 conv=notrunc status=none || die "dd write for the counters"
status_check rpcie0 connected 1 0
read -r rd1 wr1 _ <"$TMP/status.counts"
[ "$rd1" -ge $((rd0 + 3)) ] && [ "$wr1" -ge $((wr0 + 1)) ] || die "status counters: mmio_reads $rd0 -> $rd1, mmio_writes $wr0 -> $wr1"
awk '$1 == "rpcie0" { print $9, $10 }' "$TMP/status.txt" | grep -qx "$rd1 $wr1" ||
  die "status text counters of rpcie0 differ from the JSON ($rd1 $wr1): $(cat "$TMP/status.txt")"
pass "rpcie status: every field (JSON and text), MMIO counters move with the I/O"

# --- pciutils, dd ----------------------------------------------------------------------
BDF0=$(basename "$D0")
LSPCI=(lspci -A linux-sysfs -O "sysfs.path=$MNT/pci")
SETPCI=(setpci -A linux-sysfs -O "sysfs.path=$MNT/pci")
out=$("${LSPCI[@]}" -vv -nn -s "$BDF0" 2>/dev/null)
grep -q "\[1234:11e8\]" <<<"$out" && grep -q "Region 0: Memory at .*size=1M" <<<"$out" && grep -q "MSI: Enable" <<<"$out" ||
  die "lspci -vv: $out"
"${SETPCI[@]}" -s "$BDF0" COMMAND.w=0x0002 || die "setpci write"
[ "$("${SETPCI[@]}" -s "$BDF0" COMMAND.w)" = 0002 ] || die "setpci read back"
"${LSPCI[@]}" -vv -s "$BDF0" 2>/dev/null | grep -q "Control: I/O- Mem+" || die "lspci does not show the setpci change"
id=$(dd if="$D0/resource0" bs=4 count=1 status=none | od -An -tx4 | tr -d ' ')
[ "$id" = 010000ed ] || die "dd of the edu ID: '$id'"
pass "lspci -vv (ID, BAR0, MSI), setpci write read back, dd reads the edu ID"

# --- file semantics --------------------------------------------------------------------
$CHECK badinput "$D0" || die "bad input"
$CHECK events "$D0" || die "events"
$CHECK eventsstream "$D0" 2000 || die "interrupts awaited by blocking events reads"
$CHECK interrupted "$D0" || die "interrupted events read"
$CHECK membar "$DM" 64 || die "membar"
# A ThreadSanitizer build copies instead (rpcie-hostd(8), TUNING), and says so.
grep -q "memory-BAR writes are spliced\|memory-BAR writes are copied: a ThreadSanitizer build does not splice" \
  "$TMP/hostd.log" || die "hostd did not splice with fs.pipe-max-size 2097152: $(grep "memory-BAR" "$TMP/hostd.log")"
[ -x "$DRIVER" ] || die "sample driver $DRIVER not built"
"$DRIVER" "$D0" >"$TMP/drv0" 2>&1 || die "sample driver, on-demand DMA: $(cat "$TMP/drv0")"
"$DRIVER" "$DEVDIR/rpcie1" >"$TMP/drv1" 2>&1 || die "sample driver, mirror DMA: $(cat "$TMP/drv1")"
pass "sample driver passes in both DMA modes"
if [ -n "$USER_NAME" ]; then
  runuser -u "$USER_NAME" -- python3 "$(dirname "$0")/hostd_check.py" liveness "$D0" || die "non-root user in the group"
  out=$(runuser -u nobody -- dd if="$D0/resource0" bs=4 count=1 2>&1) && die "a user outside the group read resource0"
  grep -q "Permission denied" <<<"$out" || die "outside user: $out"
  pass "a non-root user in the group drives edu; others are refused"
fi
kill -0 "$HOSTD_PID" || die "hostd died"

# --- device server lost mid-I/O, then back -----------------------------------------------
exec 7<"$D0/events"  # open across the loss: EIO and POLLERR from then on, for good
# A memory BAR written (and fsynced), open and mapped across the loss: the exporter resets the
# device with the attachment, so what comes back is fresh and the old files must say so.
start_bg $CHECK stale "$DM" "$TMP/stale-go" >"$TMP/stale" 2>&1
STALE=$LAST_PID
wait_file "$TMP/stale" 15 || die "stale-file checker did not start"
grep -q "^ready" "$TMP/stale" || die "stale-file checker: $(cat "$TMP/stale")"
$CHECK loop "$D0" 20 >"$TMP/loop" 2>&1 &
LOOP=$!
( $CHECK block "$D0" >"$TMP/block" 2>&1 ) &
BLOCK=$!
wait_file "$TMP/block" 15 || die "events reader did not start: $(cat "$TMP/block" "$TMP/loop")"
sleep 0.3
kill -9 "$EXPORTER"
t0=$SECONDS
wait "$LOOP" || die "I/O loop: $(cat "$TMP/loop")"
grep -q "errno EIO" "$TMP/loop" || die "I/O with the exporter gone: $(cat "$TMP/loop")"
wait "$BLOCK"
grep -q "errno EIO" "$TMP/block" || die "blocked events read on loss: $(cat "$TMP/block")"
[ $((SECONDS - t0)) -le $((TIMEOUT_S + 2)) ] || die "EIO took $((SECONDS - t0)) s (timeout $TIMEOUT_S s)"
out=$(timeout 10 dd if="$D0/resource0" bs=4 count=1 2>&1) && die "read succeeded with the exporter gone"
grep -q "Input/output error" <<<"$out" || die "read while gone: $out"
grep -q "^state reconnecting" "$D0/remote" || die "remote while gone: $(cat "$D0/remote")"
"$RPCIE" status -o json | python3 -c '
import json, sys
x = {a["device"]: a for a in json.load(sys.stdin)["attachments"]}["rpcie0"]
assert x["state"] == "reconnecting" and x["losses"] == 1 and x["error"], x' || die "status while gone: $("$RPCIE" status -o json)"
pass "exporter SIGKILLed mid-I/O: EIO within the timeout, blocked events read failed, no hung process"
exportd_start 2
deadline=$((SECONDS + 15))
until grep -q "^generation 2" "$D0/remote" && grep -q "^state connected" "$D0/remote"; do
  [ $SECONDS -ge $deadline ] && die "no reconnect: $(cat "$D0/remote")"
  sleep 0.1
done
id=$(dd if="$D0/resource0" bs=4 count=1 status=none | od -An -tx4 | tr -d ' ')
[ "$id" = 010000ed ] || die "after reconnect, dd: '$id'"
for i in 1 2; do
  out=$(dd bs=4 count=1 status=none <&7 2>&1) && die "events file opened before the loss read without error (read $i)"
  grep -q "Input/output error" <<<"$out" || die "events file across the loss, read $i: $out"
done
python3 -c 'import select, sys; p = select.poll(); p.register(7, select.POLLIN); r = p.poll(0)
sys.exit(0 if r and r[0][1] & select.POLLERR else "poll of the old events file: %r" % r)' || die "events poll across the loss"
exec 7<&-
status_check rpcie0 connected 2 1
$CHECK events "$D0" || die "events after reconnect"
pass "reconnect after restart: same path, generation 2, I/O and interrupts work; the old events file: EIO, POLLERR for good"
deadline=$((SECONDS + 15))
until grep -q "^generation 2" "$DM/remote" && grep -q "^state connected" "$DM/remote"; do
  [ $SECONDS -ge $deadline ] && die "membar did not reconnect: $(cat "$DM/remote")"
  sleep 0.1
done
touch "$TMP/stale-go"
wait "$STALE" || die "files across the reset: $(cat "$TMP/stale")"
grep -q "^ok: files opened before the reset" "$TMP/stale" || die "stale-file checker: $(cat "$TMP/stale")"
pass "$(sed -n 's/^ok: //p' "$TMP/stale")"

# --- device server frozen (alive, silent): the deadline, not the socket, ends the wait ----
# (hostd_stall.sh covers stalls in full: shorter and longer than the lease, the watchdog.)
stop_wait "$EXPORTER" || die "the exporter did not stop"
t0=$(date +%s%N)
out=$(timeout 20 dd if="$D0/resource0" bs=4 count=1 2>&1) && die "read succeeded with the exporter frozen"
ms=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$EXPORTER"
grep -q "Input/output error" <<<"$out" || die "read with the exporter frozen: $out"
# The request's own deadline (9/10 of --timeout, Watchdog::op_deadline) ends it: not before
# timeout - 10 %, not after timeout + 1 s. It fails alone: the attachment stays (only lost
# heartbeats end one), so the next request works at once, on the same generation.
[ "$ms" -ge $((TIMEOUT_S * 900)) ] && [ "$ms" -le $((TIMEOUT_S * 1000 + 1000)) ] ||
  die "EIO after $ms ms with the exporter frozen, want $((TIMEOUT_S * 900))..$((TIMEOUT_S * 1000 + 1000)) ms (timeout ${TIMEOUT_S} s)"
id=$(timeout 10 dd if="$D0/resource0" bs=4 count=1 status=none | od -An -tx4 | tr -d ' ')
[ "$id" = 010000ed ] || die "the read after the frozen one: '$id'"
grep -q "^state connected" "$D0/remote" && grep -q "^generation 2" "$D0/remote" ||
  die "a request past its deadline ended the attachment: $(cat "$D0/remote")"
[ "$(grep -c 'rpcie0: edu0 on .* lost (' "$TMP/hostd.log")" = 1 ] ||
  die "the frozen exporter's request ended the link: $(grep 'lost (' "$TMP/hostd.log" | tail -n 2)"
# The operator learns which device failed and why; the application only sees EIO.
grep -q "hostd: warn: rpcie0: a request failed (EIO): deadline passed" "$TMP/hostd.log" ||
  die "no log line for the request that failed with EIO: $(tail -n 5 "$TMP/hostd.log")"
pass "exporter frozen: EIO in $ms ms (timeout ${TIMEOUT_S} s) for that request alone, logged; the next one works"

# --- detach ------------------------------------------------------------------------------
( timeout 30 $CHECK afterdetach "$D0" >"$TMP/afterdetach" 2>&1 ) &
AFTER=$!
wait_file "$TMP/afterdetach" 15 || die "events reader for the detach did not start"
"$RPCIE" detach -d rpcie0 >/dev/null || die "detach"
wait "$AFTER" && grep -q "^ok" "$TMP/afterdetach" || die "events file open across detach: $(cat "$TMP/afterdetach")"
[ ! -e "$D0" ] && [ ! -L "$DEVDIR/rpcie0" ] && [ ! -e "$DEVDIR/rpcie/by-export/$HOST/edu0" ] || die "detach left files"
ls "$MNT/pci/devices" | grep -q "$BDF0" && die "readdir still lists $BDF0"
J0=$(attach edu0) || die "re-attach"
[ "$(json_get "['sysfs']" <<<"$J0")" = "$D0" ] && [ -e "$D0/config" ] || die "re-attach not visible at once: $J0"
"$RPCIE" detach --all -o json | grep -q '"detached"' || die "detach --all"
[ -z "$(ls "$MNT/pci/devices")" ] || die "detach --all left $(ls "$MNT/pci/devices")"
pass "detach removes the tree and links at once; re-attach visible at once"

# --- hostd crash and restart: the state file brings the devices back ----------------------
STATE=$TMP/hostd-state.json
J0=$(attach edu0) || die "attach edu0 before the crash"
JM=$(attach mem0) || die "attach mem0 before the crash"
N0=$(json_get "['device']" <<<"$J0") NM=$(json_get "['device']" <<<"$JM")
D0=$(json_get "['sysfs']" <<<"$J0") DM=$(json_get "['sysfs']" <<<"$JM")
# The state file lists both, with what re-attaching needs and nothing secret.
python3 - "$STATE" "$N0" "$NM" "$HOST" <<'PY' || die "state file: $(cat "$STATE")"
import json, os, stat, sys
path, n0, nm, host = sys.argv[1:]
assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, oct(os.stat(path).st_mode)
doc = json.load(open(path))
assert doc["version"] == 1, doc
a = {x["device"]: x for x in doc["attachments"]}
assert sorted(a) == sorted([n0, nm]), a
for dev, export in ((n0, "edu0"), (nm, "mem0")):
    x = a[dev]
    assert (x["host"], x["port"], x["export"], x["uid"], x["dma_window"]) == (host, 7385, export, 0, 16 << 20), x
    assert set(x) <= {"device", "uid", "host", "port", "export", "dma_window", "data_path"}, x
PY
grep -qi "psk\|key" "$STATE" && die "the state file names a key: $(cat "$STATE")"
kill -9 "$HOSTD_PID"
wait "$HOSTD_PID" 2>/dev/null
stat -f "$MNT" >/dev/null 2>&1 && die "mount is not stale after SIGKILL (test premise)"
# The exporter frozen at the restart: the restores wait, and status lists them as restoring,
# with why the last try failed once one has (its deadline: --attach-timeout).
stop_wait "$EXPORTER" || die "the exporter did not stop"
echo 1048576 >/proc/sys/fs/pipe-max-size || die "cannot lower fs.pipe-max-size"
hostd_start
stat "$MNT/pci/devices" >/dev/null || die "restart did not replace the stale mount"
[ "$(grep -c " $MNT " /proc/mounts)" = 1 ] || die "mounts at $MNT: $(grep -c " $MNT " /proc/mounts)"
deadline=$((SECONDS + 2 * ATTACH_TIMEOUT_S + 5))
until "$RPCIE" status -o json | python3 -c '
import json, sys
a = {x["device"]: x for x in json.load(sys.stdin)["attachments"]}
x = a.get(sys.argv[1], {})
sys.exit(0 if x.get("state") == "restoring" and x.get("error") and x["export"] == "edu0" and x["uid"] == 0 else 1)' "$N0"; do
  [ $SECONDS -ge $deadline ] && { kill -CONT "$EXPORTER"; die "status never showed $N0 restoring with an error: $("$RPCIE" status -o json)"; }
  sleep 0.2
done
"$RPCIE" status | grep -Eq "^$N0 +$HOST:7385 +edu0 +restoring " || { kill -CONT "$EXPORTER"; die "status text while restoring: $("$RPCIE" status)"; }
kill -CONT "$EXPORTER"
# The exporter may hold both devices for the dead hostd until its lease lapses (5 s): a
# restore refused meanwhile (EBUSY) is retried with back-off. Never a dangling link.
deadline=$((SECONDS + 20))
until [ -e "$D0/remote" ] && [ -e "$DM/remote" ] && grep -q "^state connected" "$D0/remote" "$DM/remote" 2>/dev/null; do
  for n in "$N0" "$NM"; do
    [ ! -L "$DEVDIR/$n" ] || [ -e "$DEVDIR/$n" ] || die "dangling link $DEVDIR/$n after the restart"
  done
  [ $SECONDS -ge $deadline ] && die "not restored after the old hostd's lease: $(cat "$STATE"; tail -n 5 "$TMP/hostd.log")"
  sleep 0.2
done
[ "$(readlink "$DEVDIR/$N0")" = "$D0" ] && [ "$(readlink "$DEVDIR/$NM")" = "$DM" ] ||
  die "restored at other paths: $N0 -> $(readlink "$DEVDIR/$N0"), $NM -> $(readlink "$DEVDIR/$NM")"
grep -q "$N0: re-attached edu0 on $HOST:7385 from the state file" "$TMP/hostd.log" || die "no restore log line for $N0"
$CHECK liveness "$D0" >/dev/null || die "edu0 after the restore"
$CHECK membar "$DM" 4 >/dev/null || die "mem0 after the restore: $($CHECK membar "$DM" 4)"
grep -q "memory-BAR writes are copied: a pipe cannot hold a FUSE request" "$TMP/hostd.log" &&
  [ "$(grep -c "memory-BAR writes are spliced\|a ThreadSanitizer build does not splice" "$TMP/hostd.log")" = 1 ] ||
  die "the restarted hostd (pipes too small) did not say it copies, or spliced: $(grep "memory-BAR" "$TMP/hostd.log")"
"$RPCIE" status -o json | python3 -c '
import json, sys
a = {x["device"]: x for x in json.load(sys.stdin)["attachments"]}
assert a["'"$N0"'"]["uid"] == 0 and a["'"$N0"'"]["generation"] == 1 and a["'"$NM"'"]["export"] == "mem0", a' ||
  die "status after the restore: $("$RPCIE" status -o json)"
pass "hostd SIGKILL: restart replaces the stale mount, re-attaches $N0 and $NM at the same paths; they work"
kill -TERM "$HOSTD_PID"
wait "$HOSTD_PID" || die "hostd exit status on SIGTERM"
grep -q " $MNT " /proc/mounts && die "SIGTERM left the mount"
[ ! -L "$DEVDIR/rpcie0" ] || die "SIGTERM left the /dev link"
ls /dev/shm | grep -q "rpcie-dma-$HOSTD_PID-" && die "SIGTERM left a DMA window file"
# A stop is not a detach: the next start restores the same list.
[ "$(python3 -c "import json; print(len(json.load(open('$STATE'))['attachments']))")" = 2 ] ||
  die "SIGTERM changed the state file: $(cat "$STATE")"
pass "SIGTERM cleans up mount, links and windows, and keeps the state file for the next start"

# --- a malformed state file: logged, kept aside, not fatal --------------------------------
echo '{"version":1,"attachments":[{"device":"rpcie0",' >"$STATE"
cp "$STATE" "$TMP/garbage"
hostd_start
grep -q "state file $STATE: not JSON: nothing restored; kept as $STATE.bad" "$TMP/hostd.log" ||
  die "no clear error for the malformed state file: $(tail -n 5 "$TMP/hostd.log")"
cmp -s "$TMP/garbage" "$STATE.bad" || die "the malformed state file was not kept as $STATE.bad"
[ "$("$RPCIE" status -o json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["attachments"]))')" = 0 ] ||
  die "something was restored from a malformed file"
deadline=$((SECONDS + 10))  # the previous hostd's SIGTERM detached edu0: free at once
until J0=$(attach edu0 2>/dev/null); do
  [ $SECONDS -ge $deadline ] && die "attach after a malformed state file"
  sleep 0.2
done
python3 -c "import json; a = json.load(open('$STATE'))['attachments']; assert [x['export'] for x in a] == ['edu0'], a" ||
  die "state file after an attach: $(cat "$STATE")"
"$RPCIE" detach --all >/dev/null || die "detach --all"
python3 -c "import json; assert json.load(open('$STATE'))['attachments'] == []" || die "state file after detach: $(cat "$STATE")"
kill -TERM "$HOSTD_PID"
wait "$HOSTD_PID" || die "hostd exit status on SIGTERM"
pass "a malformed state file is logged and kept as .bad; hostd starts, attach and detach rewrite the file"
