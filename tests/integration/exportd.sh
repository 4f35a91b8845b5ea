#!/usr/bin/env bash
# rpcie-exportd end to end with real processes: the exporter on the "device server", the
# rpcie CLI and rpcie-devcheck (client API) on the "compute server".
#   exportd.sh netns BUILDDIR   tcp;ofi_rxm across two network namespaces joined by a veth pair
#   exportd.sh shm BUILDDIR     both on this host over shm
# BUILDDIR holds devexport/rpcie-exportd, tools/rpcie, tests/rpcie-devcheck and tests/rpcie-doorbellcheck.
. "$(dirname "$0")/lib.sh"
MODE=$1 B=$2
EXPORTD=$B/devexport/rpcie-exportd RPCIE=$B/tools/rpcie DEVCHECK=$B/tests/rpcie-devcheck
DOORBELLCHECK=$B/tests/rpcie-doorbellcheck
LEASE_S=2
# Exporter and clients on different CPUs, as on two servers: with both on one CPU of this
# two-core machine the timing check (posted writes) measures the scheduler instead.
PIN_DEV=() PIN_CMP=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then PIN_DEV=(taskset -c 0) PIN_CMP=(taskset -c 1); fi

if [ "$MODE" = netns ]; then
  netns_pair rpcie 169.254.78
  ON_DEV=(nsenter --net="/run/netns/$DEV")
  ON_CMP=(nsenter --net="/run/netns/$CMP")
  HOST=169.254.78.1 PROVIDER=tcp
else
  ON_DEV=() ON_CMP=()
  HOST=127.0.0.1 PROVIDER=shm
fi

"$RPCIE" keygen "$TMP/psk" >/dev/null || die "keygen"
[ "$(stat -c %a "$TMP/psk")" = 600 ] || die "keygen did not make a 0600 file"
"$RPCIE" keygen "$TMP/other" >/dev/null || die "keygen (second key)"
cat >"$TMP/exportd.toml" <<TOML
listen = "$HOST:0"
provider = "$PROVIDER"
psk-file = "$TMP/psk"
lease = "${LEASE_S}s"
access-log = "$TMP/access.log"

[[client]]
name = "alice"
psk-file = "$TMP/alice.psk"

[[export]]
name = "edu1"
backend = "edu"
dma = "mirror"

[[export]]
name = "edu3"
backend = "edu"
allow = ["alice"]

[[export]]
name = "edus"
backend = "edu"
data-path = "sealed"
TOML
"$RPCIE" keygen "$TMP/alice.psk" >/dev/null || die "keygen (alice)"
# A real PCI function bound to a host driver, exported read-only (where this machine has
# one); not a bridge (class 0x06xxxx), which pci-sysfs refuses to export.
SYSFS_EXPORT=() BDF=
for d in /sys/bus/pci/devices/*; do
  [ -e "$d/driver" ] && [ -e "$d/config" ] && [[ $(cat "$d/class") != 0x06* ]] && { BDF=$(basename "$d"); break; }
done
[ -n "$BDF" ] && SYSFS_EXPORT=(--export "sys0=pci-sysfs,bdf=$BDF")

# --- Bad configuration: clear errors, no daemon ---------------------------------------
printf 'listen = "x\n' >"$TMP/broken.toml"
out=$("${ON_DEV[@]}" "$EXPORTD" --config "$TMP/broken.toml" --export a=edu 2>&1); rc=$?
[ $rc = 1 ] && grep -q "broken.toml:1" <<<"$out" || die "malformed config: rc $rc, '$out'"
printf 'lisen = "x"\n' >"$TMP/unknown.toml"
out=$("${ON_DEV[@]}" "$EXPORTD" --config "$TMP/unknown.toml" --psk-file "$TMP/psk" --export a=edu 2>&1); rc=$?
[ $rc = 1 ] && grep -q "unknown key 'lisen'" <<<"$out" || die "unknown config key: rc $rc, '$out'"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/psk" --export a=floppy 2>&1); rc=$?
[ $rc = 1 ] && grep -q "unknown backend 'floppy'" <<<"$out" || die "unknown backend: rc $rc, '$out'"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/psk" --export a=edu,delay=soon 2>&1); rc=$?
[ $rc = 1 ] && grep -q "delay" <<<"$out" || die "bad backend parameter: rc $rc, '$out'"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/psk" --export noequals 2>&1); rc=$?
[ $rc = 2 ] || die "malformed --export: rc $rc, '$out'"
chmod 644 "$TMP/other"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/other" --export a=edu 2>&1); rc=$?
[ $rc = 1 ] && grep -q "group or others" <<<"$out" || die "world-readable key accepted: rc $rc, '$out'"
chmod 600 "$TMP/other"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/psk" --access-log "$TMP/no/such/dir/a.log" --export a=edu 2>&1); rc=$?
[ $rc = 1 ] && grep -q "access log $TMP/no/such/dir/a.log: No such file" <<<"$out" || die "bad --access-log: rc $rc, '$out'"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/psk" --export a=membar,doorbell=sometimes 2>&1); rc=$?
[ $rc = 1 ] && grep -q "doorbell 'sometimes'" <<<"$out" || die "bad doorbell value: rc $rc, '$out'"
printf 'psk-file = "%s"\n[[export]]\nname = "a"\nbackend = "edu"\ndata-path = "clear"\n' "$TMP/psk" >"$TMP/datapath.toml"
out=$("${ON_DEV[@]}" "$EXPORTD" --config "$TMP/datapath.toml" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "datapath.toml:5: export 1: data-path: data path must be sealed, open or auto, not 'clear'" <<<"$out" ||
  die "bad data-path in the config: rc $rc, '$out'"
out=$("${ON_DEV[@]}" "$EXPORTD" --psk-file "$TMP/psk" --data-path clear --export a=edu 2>&1); rc=$?
[ $rc = 2 ] && grep -q "^rpcie-exportd: error: --data-path: data path must be sealed, open or auto" <<<"$out" ||
  die "bad --data-path: rc $rc, '$out'"
pass "bad configuration refused with clear errors"

# --- The exporter ----------------------------------------------------------------------
start_bg "${ON_DEV[@]}" "${PIN_DEV[@]}" "$EXPORTD" --config "$TMP/exportd.toml" --export edu0=edu \
  --export mem0=membar,size=64M --export mdb=membar,size=1M,doorbell=on --export edu2=edu,delay=1ms \
  --export edud=edu,delay=500ms --export edudm=edu,delay=500ms,dma=mirror --export eduo=edu,data-path=open "${SYSFS_EXPORT[@]}" 2>"$TMP/exportd.log"
EXPORTER=$LAST_PID
exportd_port_wait "$TMP/exportd.log" "$EXPORTER"
R=$HOST:$PORT
cli() { timeout 30 "${ON_CMP[@]}" "$RPCIE" "$@"; }
check() { timeout 60 "${ON_CMP[@]}" "${PIN_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --provider "$PROVIDER" "$@"; }

# --- list ------------------------------------------------------------------------------
cli list -r "$R" --psk-file "$TMP/psk" -o json >"$TMP/list.json" || die "list: $(cat "$TMP/list.json")"
python3 - "$TMP/list.json" "$PROVIDER" <<'PY' || die "list JSON: $(cat "$TMP/list.json")"
import json, sys
d = json.load(open(sys.argv[1]))
# The mode an attach from here would run: the export's policy, else the provider's default.
default = "sealed" if sys.argv[2] == "tcp" else "open"
e = {x["name"]: x for x in d["exports"]}
assert {"edu0", "edu1", "edu2", "edu3", "mem0"} <= set(e), e.keys()
assert e["edu0"]["vendor"] == "0x1234" and e["edu0"]["device"] == "0x11e8" and e["edu0"]["class"] == "0x00ff00"
assert e["edu0"]["backend"] == "edu" and e["edu0"]["state"] == "free" and e["edu1"]["dma"] == "mirror"
assert e["edu0"]["bars"] == [{"bar": 0, "size": 1 << 20, "type": "registers", "64bit": False, "readonly": False, "direct": False}]
assert e["mem0"]["bars"][0]["size"] == 64 << 20 and e["mem0"]["bars"][0]["direct"] and e["mem0"]["bars"][0]["type"] == "memory"
assert [(b["bar"], b["type"], b["size"], b["direct"]) for b in e["mdb"]["bars"]] == [(0, "memory", 1 << 20, True), (2, "registers", 4096, False)], e["mdb"]
assert e["mdb"]["vectors"] == 1 and e["mem0"]["vectors"] == 0, (e["mdb"], e["mem0"])
assert (e["edu0"]["data_path"], e["edu0"]["data_path_policy"]) == (default, "auto"), e["edu0"]
assert (e["edus"]["data_path"], e["edus"]["data_path_policy"]) == ("sealed", "sealed"), e["edus"]
assert (e["eduo"]["data_path"], e["eduo"]["data_path_policy"]) == ("open", "open"), e["eduo"]
PY
cli list -r "$R" --psk-file "$TMP/psk" | grep -q "^edu0 .*1234:11e8 .*free" || die "list text"
cli list -r "$R" --psk-file "$TMP/psk" | grep -q "^eduo .* open  *free" || die "list text: no data path column"
pass "list (text and JSON)"

# --- Device behaviour through the client API ---------------------------------------------
check edu edu0 || die "edu, on-demand DMA"
check edu edu1 || die "edu, mirror DMA"
# Each out-of-window DMA above (devcheck's 1 MiB window, 4096 bytes at its last 16) was refused
# by the exporter's DMA port with EFAULT, for both exports and both directions.
for dir in "to IOVA 0xffff0 not performed: DMA write" "from IOVA 0xffff0 not performed: DMA read"; do
  n=$(grep -c "DMA of 4096 bytes $dir outside the window: Bad address" "$TMP/exportd.log")
  [ "$n" = 2 ] || die "exporter log: $n lines 'DMA of 4096 bytes $dir outside the window: Bad address', want 2 (edu0, edu1)"
done
# Timed: the median burst of five (two may lose their CPU to the scheduler: devcheck.cc,
# posted_check), and every burst's message count (batching, which no scheduler explains).
check posted edu0 --outliers 2 || die "posted writes"
check posted edu1 --outliers 2 || die "posted writes (mirror)"
check push edu1 || die "streaming DMA (window_push), mirror"
check push edu0 || die "window_push on an on-demand export"
check membar mem0 64M || die "membar"
timeout 60 "${ON_CMP[@]}" "$DOORBELLCHECK" -r "$R" --psk-file "$TMP/psk" --provider "$PROVIDER" mdb "$TMP/access.log" ||
  die "membar doorbell (access log: $(grep '^mdb ' "$TMP/access.log" | tail -20))"
check errors edu0 || die "bad accesses"
check hostile edu0 || die "hostile data path"
check hostile edu1 || die "hostile data path (mirror)"
check reattach edu0 || die "detach / re-attach"
if [ -n "$BDF" ]; then
  check postedfail sys0 || die "read-only pci-sysfs device ($BDF)"
else
  skip_check "no driver-bound PCI function (not a bridge) here: the read-only pci-sysfs export"
fi

# --- Authentication ------------------------------------------------------------------------
out=$(cli list -r "$R" --psk-file "$TMP/other" 2>&1); rc=$?
[ $rc = 1 ] && grep -q "^rpcie: error: .*authentication failed" <<<"$out" || die "wrong key: rc $rc, '$out'"
out=$(timeout 30 "${ON_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/other" edu edu0 2>&1); rc=$?
[ $rc != 0 ] && grep -q "authentication failed" <<<"$out" || die "attach with a wrong key: rc $rc, '$out'"
check badmac || die "bad MAC"
# Per-client keys and allow lists: alice has her own key and is the only one allowed on edu3.
alice() { timeout 60 "${ON_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/alice.psk" --name alice --provider "$PROVIDER" "$@"; }
alice reattach edu3 || die "alice with her own key on edu3"
check --name bob attachfail edu3 13 "not allowed" || die "bob attached edu3 despite the allow list"
out=$(timeout 30 "${ON_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --name alice list 2>&1); rc=$?
[ $rc != 0 ] && grep -q "authentication failed" <<<"$out" || die "alice authenticated with the shared key: '$out'"
check attachfail no-such-export 2 "no export named" || die "unknown export"
# The export's data-path policy wins; a client that insists on the other mode is refused.
check --data-path sealed attachfail eduo 71 "the client insists on the sealed data path; export eduo allows only open" ||
  die "an insisting client of the other data path was not refused"
check --data-path open attachfail edus 71 "insists on the open data path; export edus allows only sealed" ||
  die "an insisting client of the other data path was not refused (sealed export)"
grep -q "attach refused: the client insists on the sealed data path; export eduo allows only open" "$TMP/exportd.log" ||
  die "exporter did not log the data-path refusal"
grep -q "MAC does not verify" "$TMP/exportd.log" || die "exporter did not log the bad MAC"
grep -q "attached edu0 (window .*, data path $([ "$PROVIDER" = tcp ] && echo sealed || echo open))" "$TMP/exportd.log" ||
  die "exporter did not log edu0's data path"
pass "wrong key refused, forged frame dropped, insisting on the other data path refused"

# --- Exclusive attach, leases ---------------------------------------------------------------
list_state() { cli list -r "$R" --psk-file "$TMP/psk" | awk -v n="$1" '$1 == n { print $NF }'; }
# wait_free NAME SECONDS: prints how long it took.
wait_free() {
  local start=$SECONDS deadline=$((SECONDS + $2))
  while [ "$(list_state "$1")" != free ]; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
  echo $((SECONDS - start))
}
start_bg "${ON_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --provider "$PROVIDER" --name holder-a hold edu2 120 \
  >"$TMP/hold.out"
HOLDER=$LAST_PID
wait_file "$TMP/hold.out" 20 || die "holder did not attach"
cli list -r "$R" --psk-file "$TMP/psk" | grep -q "^edu2 .*attached by holder-a" || die "list does not show the holder"
check --name other-b busy edu2 || die "second attach not refused as busy"
kill -9 "$HOLDER"
shm_regions_drop "$HOLDER"
t=$(wait_free edu2 $((LEASE_S + 3))) || die "export not free after the client was killed"
pass "second attach refused (busy); SIGKILLed client's export free again after ${t}s"
# A client that stops answering without closing its connection: only the lease notices.
start_bg "${ON_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --provider "$PROVIDER" --name holder-c hold edu2 120 \
  >"$TMP/hold2.out"
HOLDER=$LAST_PID
wait_file "$TMP/hold2.out" 20 || die "second holder did not attach"
kill -STOP "$HOLDER"
t=$(wait_free edu2 $((LEASE_S + 3))) || die "export not free within the lease after the client froze"
kill -9 "$HOLDER"
shm_regions_drop "$HOLDER"
grep -q "lease lapsed" "$TMP/exportd.log" || die "the exporter did not report the lease"
check edu edu2 >/dev/null || die "edu2 unusable after a lease lapse"
pass "frozen client's export free after ${t}s (lease ${LEASE_S}s); device usable again"

# --- shm: what a killed process left does not stop the next one that gets its PID ----------
# libfabric's shm names an endpoint's region /dev/shm/<pid>:..., a process killed with SIGKILL
# leaves it, and libfabric 1.17 refuses the file (EBUSY) to a later process with that PID.
# PID 1 of a new PID namespace is the same PID every time.
if [ "$MODE" = shm ] && ! unshare --pid --fork --mount-proc true 2>"$TMP/unshare.err"; then
  skip_check "no PID namespaces here ($(cat "$TMP/unshare.err")): the stale shm region check"
elif [ "$MODE" = shm ]; then
  rm -f /dev/shm/1:*
  start_bg unshare --pid --fork --mount-proc "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --provider shm \
    --name pid-one hold edu0 120 >"$TMP/hold3.out"
  UNSHARED=$LAST_PID
  wait_file "$TMP/hold3.out" 20 || die "holder in a PID namespace did not attach"
  pkill -9 -P "$UNSHARED"
  wait "$UNSHARED" 2>/dev/null
  [ -e /dev/shm/1:0:0 ] || die "test premise: the killed holder left no /dev/shm/1:0:0"
  out=$(RPCIE_LOG=info timeout 60 unshare --pid --fork --mount-proc "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" \
    --provider shm reattach edu1 2>&1) || true
  grep -q "^ok: detach then re-attach" <<<"$out" && grep -q "removed /dev/shm/1:0:0" <<<"$out" ||
    die "attach with a dead process's shm region under this PID: $out"
  [ ! -e /dev/shm/1:0:0 ] || die "the region of the detached process is still there"
  pass "shm region left by a killed process with this PID removed; attach works"
fi

# --- Hostile bootstrap peers: the exporter keeps serving ------------------------------------
"${ON_CMP[@]}" python3 - "$HOST" "$PORT" <<'PY' || die "hostile peers script"
import socket, sys, struct
host, port = sys.argv[1], int(sys.argv[2])
def peer(data, linger=False):
    s = socket.create_connection((host, port), timeout=5)
    if data: s.sendall(data)
    if linger:
        s.settimeout(5)
        try: s.recv(100)
        except Exception: pass
    s.close()
peer(b"GET / HTTP/1.0\r\n\r\n", True)              # garbage
peer(struct.pack("<I", 0xffffffff), True)          # absurd length
peer(struct.pack("<I", 100) + b"RPCI", False)      # hang up mid-frame
peer(b"", False)                                   # connect and leave
PY
cli list -r "$R" --psk-file "$TMP/psk" >/dev/null || die "exporter stopped serving after hostile peers"
kill -0 "$EXPORTER" || die "exporter died"
pass "garbage, absurd lengths and hang-ups mid-handshake: exporter keeps serving"

# --- Link loss: the exporter dies under an attachment -----------------------------------------
start_bg "${ON_DEV[@]}" "$EXPORTD" --listen "$HOST:0" --provider "$PROVIDER" --psk-file "$TMP/psk" \
  --export edu9=edu,dma=mirror 2>"$TMP/exportd2.log"
DOOMED=$LAST_PID
PORT1=$PORT
exportd_port_wait "$TMP/exportd2.log" "$DOOMED"
PORT2=$PORT PORT=$PORT1
start_bg timeout 60 "${ON_CMP[@]}" "$DEVCHECK" -r "$HOST:$PORT2" --psk-file "$TMP/psk" --provider "$PROVIDER" \
  linkloss edu9 >"$TMP/linkloss.out"
LOSER=$LAST_PID
wait_file "$TMP/linkloss.out" 20 || die "linkloss client did not attach"
kill -9 "$DOOMED"
shm_regions_drop "$DOOMED"
wait "$LOSER"; rc=$?
cat "$TMP/linkloss.out"
[ $rc = 0 ] || die "link loss not reported as an error (rc $rc)"

# --- A cut link is resumed: the device keeps its state, nothing is lost, nobody sees an error --
# The veth goes down for half a second with every TCP connection torn down (ss -K: a real
# connection loss), then the connections are torn down once more right after: two losses,
# each shorter than the lease (2 s), while rpcie-devcheck writes and reads edu0.
if [ "$MODE" = netns ]; then
  log_from=$(($(wc -l <"$TMP/access.log") + 1))
  start_bg "${ON_CMP[@]}" "${PIN_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --provider "$PROVIDER" \
    resume edu0 6 >"$TMP/resume.out"
  CUT=$LAST_PID
  wait_file "$TMP/resume.out" 20 || die "resume client did not attach"
  sleep 1
  ip -n "$CMP" link set "vc$$" down && ip -n "$DEV" link set "vd$$" down || die "veth down"
  "${ON_CMP[@]}" ss -K -t state established >/dev/null
  "${ON_DEV[@]}" ss -K -t state established >/dev/null
  sleep 0.5
  ip -n "$DEV" link set "vd$$" up && ip -n "$CMP" link set "vc$$" up || die "veth up"
  deadline=$((SECONDS + 10))
  until grep -q "attachment [0-9]* of edu0 by .*: resumed" "$TMP/exportd.log"; do
    [ $SECONDS -ge $deadline ] && die "no resumption of edu0 in the exporter's log 10 s after the link came back: $(cat "$TMP/resume.out"; tail -n 20 "$TMP/exportd.log")"
    sleep 0.1
  done
  "${ON_CMP[@]}" ss -K -t state established >/dev/null
  wait "$CUT"; rc=$?
  cat "$TMP/resume.out"
  [ $rc = 0 ] || die "resume check failed (rc $rc): $(tail -n 20 "$TMP/exportd.log")"
  [ "$(grep -c "attachment [0-9]* of edu0 by .*: resumed" "$TMP/exportd.log")" -ge 2 ] ||
    die "the second cut was not resumed: $(grep "edu0" "$TMP/exportd.log" | tail -n 10)"
  # Exactly once, in order: the device performed the posted writes 1..N to the liveness
  # register each once, none lost and none twice (what a resume sent again included).
  last=$(sed -n 's/.*liveness writes 1\.\.\([0-9]*\)$/\1/p' "$TMP/resume.out")
  [ -n "$last" ] && [ "$last" -gt 0 ] || die "resume check: no count of writes: $(cat "$TMP/resume.out")"
  tail -n +"$log_from" "$TMP/access.log" | sed -n 's/^edu0 write bar=0 offset=0x4 width=4 value=0x\([0-9a-f]*\)$/\1/p' |
    python3 -c "import sys; v=[int(l, 16) for l in sys.stdin]; n=int(sys.argv[1]); sys.exit(0 if v == list(range(1, n + 1)) else print(f'{len(v)} writes, expected 1..{n}: first differences', [(i + 1, x) for i, x in enumerate(v) if x != i + 1][:5]) or 1)" "$last" ||
    die "the device did not see the liveness writes 1..$last exactly once each, in order"
  pass "link cut twice (veth down 0.5 s + ss -K, then ss -K): resumed each time, device state kept, no error; the device saw writes 1..$last once each, in order"
fi

# --- Writes made while the link is down are not lost to the resumption ----------------------
# The veth goes down, a write is made (small enough for the socket's send buffer to take it),
# and after 1 s every TCP connection is torn down and the veth comes up: the write is
# resumed, not lost. dmaresume: the device's DMA into the window, due 0.5 s after its command
# (a delayed edu; on-demand: RMA writes into the window; mirror: the push with the
# interrupt), must be in the window when its interrupt arrives. barresume: a memory-BAR write
# the client made meanwhile must be in the BAR. Both data paths.
if [ "$MODE" = netns ]; then
  for run in "dmaresume edud sealed" "dmaresume edudm sealed" "dmaresume edud open" "dmaresume edudm open" \
    "barresume mem0 sealed" "barresume mem0 open"; do
    read -r what exp path <<<"$run"
    rm -f "$TMP/go"
    start_bg "${ON_CMP[@]}" "${PIN_CMP[@]}" "$DEVCHECK" -r "$R" --psk-file "$TMP/psk" --provider "$PROVIDER" \
      --data-path "$path" $what "$exp" $([ "$what" = barresume ] && echo "$TMP/go") >"$TMP/cut.out"
    CUT=$LAST_PID
    deadline=$((SECONDS + 20))
    until grep -q "^started\|^attached" "$TMP/cut.out"; do
      [ $SECONDS -ge $deadline ] || ! kill -0 "$CUT" 2>/dev/null && die "$run did not start: $(cat "$TMP/cut.out")"
      sleep 0.02
    done
    ip -n "$CMP" link set "vc$$" down && ip -n "$DEV" link set "vd$$" down || die "veth down"
    touch "$TMP/go"
    sleep 1
    "${ON_CMP[@]}" ss -K -t state established >/dev/null
    "${ON_DEV[@]}" ss -K -t state established >/dev/null
    ip -n "$DEV" link set "vd$$" up && ip -n "$CMP" link set "vc$$" up || die "veth up"
    wait "$CUT"; rc=$?
    cat "$TMP/cut.out"
    [ $rc = 0 ] || die "$run failed (rc $rc): $(grep "$exp" "$TMP/exportd.log" | tail -n 10)"
  done
  pass "link down 1 s + ss -K under a device's DMA into the window (on-demand, mirror) and a memory-BAR write (sealed, open): nothing lost"
fi

# --- Clean shutdown --------------------------------------------------------------------------
kill -TERM "$EXPORTER"
timeout 10 tail --pid="$EXPORTER" -f /dev/null || die "exporter did not stop on SIGTERM"
wait "$EXPORTER"; rc=$?
[ $rc = 0 ] || die "exporter exited $rc on SIGTERM"
grep -q "stopped" "$TMP/exportd.log" || die "no clean stop in the log"
pass "SIGTERM: clean shutdown"
