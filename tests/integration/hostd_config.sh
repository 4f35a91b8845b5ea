#!/usr/bin/env bash
# rpcie-hostd's configuration file: [[attach]] entries attached at start and retried until
# their exporter comes, kept across restarts without double attaches, `rpcie attach --persist`
# / `detach --persist` editing the file, and bad files refused with FILE:LINE and exit 1.
#   hostd_config.sh BUILDDIR
#
#   namespace rpcieh-dev-PID                      namespace rpcieh-cmp-PID
#   ┌──────────────────────────────────┐          ┌──────────────────────────────────┐
#   │ exportd A :7385  edu0 edu1        │  veth    │ rpcie-hostd --config $TMP/h.toml │
#   │ exportd B :7386  mem0 (started    │<-------->│   [[attach]] edu0 on A (rpcie0)  │
#   │           after hostd)            │          │   [[attach]] mem0 on B (rpcie1)  │
#   │ 169.254.97.1                      │          │ 169.254.97.2                     │
#   └──────────────────────────────────┘          └──────────────────────────────────┘
# The configuration lives in the test's directory: never under /etc/rpcie.
. "$(dirname "$0")/lib.sh"
B=$1
HOSTD=$B/frontend/rpcie-hostd RPCIE=$B/tools/rpcie
DRIVER=$B/tools/edu-driver/rpcie-edu-driver
CHECK="python3 $(dirname "$0")/hostd_check.py"
command -v python3 >/dev/null || skip "python3 is not installed"
[ -x "$DRIVER" ] || die "sample driver $DRIVER not built"
CONF=$TMP/h.toml

# --- bad files: FILE:LINE and exit 1, before anything is mounted ----------------------------
# bad_config NAME WANT_MESSAGE TEXT: hostd refuses TEXT with exit 1 and exactly WANT_MESSAGE.
bad_config() {
  local name=$1 want=$2 file=$TMP/$1.toml
  printf '%s' "$3" >"$file"
  expect_rc 1 "bad config ($name)" "$HOSTD" --foreground --config "$file" --mount "$TMP/bad-mnt" \
    --control "$TMP/bad.sock" --dev-dir "$TMP" --psk-file /nonexistent --state-file ''
  [ "$(cat "$TMP/err")" = "rpcie-hostd: error: $file:$want" ] ||
    die "bad config ($name): message '$(cat "$TMP/err")', want 'rpcie-hostd: error: $file:$want'"
  [ ! -e "$TMP/bad-mnt" ] || die "bad config ($name): hostd went on to mount"
}
bad_config unknown-key "3: unknown key 'psk_file'" $'# hostd\ntimeout = 2\npsk_file = "/etc/rpcie/psk"\n'
bad_config wrong-type "2: provider: must be a string" $'\nprovider = 7\n'
bad_config bad-port "4: attach: port: expected 1-65535" \
  $'[[attach]]\nhost = "169.254.97.1"\nexport = "edu0"\nport = 0\n'
bad_config duplicate "5: attach: edu0 on 169.254.97.1:7385 is configured twice (first at $TMP/duplicate.toml:1)" \
  $'[[attach]]\nhost = "169.254.97.1"\nexport = "edu0"\n\n[[attach]]\nhost = "169.254.97.1"\nport = 7385\nexport = "edu0"\n'
bad_config bad-value "2: timeout: expected seconds >= 0.1, got 'soon'" $'\ntimeout = "soon"\n'
bad_config bad-metrics "2: metrics: expected ADDR:PORT or [IPV6]:PORT with a numeric address, got 'nowhere': no port" \
  $'\nmetrics = "nowhere"\n'
bad_config bad-window "1: attach: dma_window of 1073741824 bytes is over --max-dma-window (268435456 bytes)" \
  $'[[attach]]\nhost = "h"\nexport = "e"\ndma-window = "1G"\n'
# The command line's value overrides the file's: the file's bad value is never used.
printf 'timeout = "soon"\n' >"$TMP/override.toml"
expect_rc 1 "command line over the file" "$HOSTD" --foreground --config "$TMP/override.toml" --timeout 2 \
  --mount "$TMP/bad-mnt" --control "$TMP/bad.sock" --dev-dir "$TMP" --psk-file /nonexistent --state-file ''
grep -q "/nonexistent" "$TMP/err" || die "--timeout did not override the file's: $(cat "$TMP/err")"
# A bad value on the command line stays a usage error (2).
expect_rc 2 "bad --timeout" "$HOSTD" --foreground --config "$TMP/override.toml" --timeout soon --psk-file /nonexistent
expect_rc 1 "missing --config file" "$HOSTD" --foreground --config "$TMP/none.toml" --psk-file /nonexistent
grep -q "$TMP/none.toml: cannot open the config file" "$TMP/err" || die "missing --config file: $(cat "$TMP/err")"
pass "bad configuration files: unknown key, wrong type, bad port, duplicate entry, bad values (timeout, metrics), window over the cap -> exit 1 with FILE:LINE; the command line overrides the file"

# --- the stack: exporter A now, exporter B later ------------------------------------------
cat >"$CONF" <<EOF
splice-writes = false  # rpcie-hostd test configuration (memory-BAR writes copied, not spliced)
dma-window = "8M"

[[attach]]
host = "169.254.97.1"
export = "edu0"
device = "rpcie0"

# exporter B starts after hostd
[[attach]]
host = "169.254.97.1"
port = 7386
export = "mem0"
device = "rpcie1"
EOF
cp "$CONF" "$TMP/h.toml.orig"
HOSTD_ARGS=(--config "$CONF" --attach-timeout 4)
stack_start "$B" rpcieh 169.254.97 edu0=edu edu1=edu
STATE=$TMP/hostd-state.json

# wait_status SECONDS PYTHON: polls `rpcie status -o json` until PYTHON (given `a`, the
# attachments by device name) holds.
wait_status() {
  local deadline=$((SECONDS + $1))
  until "$RPCIE" status -o json >"$TMP/status.json" 2>/dev/null &&
    python3 -c "import json, sys
a = {x['device']: x for x in json.load(open('$TMP/status.json'))['attachments']}
sys.exit(0 if ($2) else 1)"; do
    [ $SECONDS -ge $deadline ] && die "status never showed $2: $(cat "$TMP/status.json")"
    sleep 0.2
  done
}
wait_status 20 "a.get('rpcie0', {}).get('state') == 'connected'"
python3 - "$TMP/status.json" <<'PY' || die "status with exporter B down: $(cat "$TMP/status.json")"
import json, sys
a = {x["device"]: x for x in json.load(open(sys.argv[1]))["attachments"]}
assert sorted(a) == ["rpcie0", "rpcie1"], a
assert a["rpcie0"]["export"] == "edu0" and a["rpcie0"]["dma_window"] == 8 << 20, a  # the file's dma-window
assert a["rpcie1"]["state"] == "restoring" and a["rpcie1"]["exporter"] == "169.254.97.1:7386", a
PY
"$DRIVER" "$DEVDIR/rpcie0" >"$TMP/drv0" 2>&1 || die "edu driver on the configured rpcie0: $(cat "$TMP/drv0")"
pass "hostd starts with exporter B down: rpcie0 (edu0) attached from the file and driven, rpcie1 restoring"

start_bg "${ON_DEV[@]}" "$EXPORTD" --listen "$HOST:7386" --provider tcp --psk-file "$TMP/psk" \
  --export mem0=membar,size=16M,doorbell=on 2>>"$TMP/exportd-b.log"
EXPORTD_B=$LAST_PID
# Its back-off is at most 60 s (with 25% jitter); hostd has run a few seconds: far less here.
wait_status 40 "a.get('rpcie1', {}).get('state') == 'connected'"
$CHECK membar "$DEVDIR/rpcie1" 16 >"$TMP/membar" || die "membar through the configured rpcie1: $(cat "$TMP/membar")"
grep -q "memory-BAR writes are copied (--splice-writes off)" "$TMP/hostd.log" &&
  ! grep -q "memory-BAR writes are spliced" "$TMP/hostd.log" || die "splice-writes = false: $(grep "memory-BAR" "$TMP/hostd.log")"
pass "rpcie1 (mem0) attached once exporter B started; 16 MiB written (copied: splice-writes = false) and read back with the device's checksum"

# restart_hostd [fresh]: SIGTERM, start again (fresh: without the state file, as after a
# reboot), and wait until both configured devices are connected.
restart_hostd() {
  kill -TERM "$HOSTD_PID"
  wait "$HOSTD_PID" || die "hostd exit status on SIGTERM"
  [ "${1:-}" = fresh ] && rm -f "$STATE"
  stack_hostd_start
  wait_status 30 "all(a.get(d, {}).get('state') == 'connected' for d in ('rpcie0', 'rpcie1'))"
}
restart_hostd
python3 -c "import json; a = json.load(open('$TMP/status.json'))['attachments']
assert sorted(x['device'] for x in a) == ['rpcie0', 'rpcie1'], a" || die "after a restart: $(cat "$TMP/status.json")"
restart_hostd fresh
python3 -c "import json; a = json.load(open('$TMP/status.json'))['attachments']
assert sorted(x['device'] for x in a) == ['rpcie0', 'rpcie1'], a" || die "after a fresh start: $(cat "$TMP/status.json")"
"$DRIVER" "$DEVDIR/rpcie0" >"$TMP/drv0" 2>&1 || die "edu driver after the restarts: $(cat "$TMP/drv0")"
pass "restarts (with the state file, and without it) bring back exactly rpcie0 and rpcie1, no double attach"

# --- attach --persist / detach --persist ------------------------------------------------
"${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu1 --persist >"$TMP/attach.out" || die "attach --persist"
grep -qx "persisted in $CONF" "$TMP/attach.out" || die "attach --persist output: $(cat "$TMP/attach.out")"
N2=$(awk 'NR == 1 { print $1 }' "$TMP/attach.out")
[ "$N2" = rpcie2 ] || die "attach --persist named $N2"
python3 - "$CONF" "$TMP/h.toml.orig" "$HOST" <<'PY' || die "config after attach --persist: $(cat "$CONF")"
import sys, tomllib
conf, orig, host = sys.argv[1:]
text = open(conf).read()
assert text.startswith(open(orig).read()), text  # every earlier line kept, comments too
a = tomllib.loads(text)["attach"]
assert len(a) == 3, a
assert a[2] == {"host": host, "port": 7385, "export": "edu1", "device": "rpcie2"}, a[2]
PY
expect_rc 1 "attach --persist of a configured export" "${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu0 --persist
grep -q "edu0 on $HOST:7385 is configured already ($CONF:4)" "$TMP/err" || die "second persist: $(cat "$TMP/err")"
restart_hostd fresh
wait_status 30 "a.get('rpcie2', {}).get('state') == 'connected' and len(a) == 3"
"$DRIVER" "$DEVDIR/rpcie2" >"$TMP/drv2" 2>&1 || die "edu driver on the persisted rpcie2: $(cat "$TMP/drv2")"
pass "attach --persist appends the entry (other lines kept); a fresh start attaches it again as rpcie2"

"$RPCIE" detach -d rpcie2 --persist >/dev/null || die "detach --persist"
cmp -s "$CONF" "$TMP/h.toml.orig" || die "detach --persist did not restore the file: $(diff "$TMP/h.toml.orig" "$CONF")"
"$RPCIE" status -o json | python3 -c 'import json,sys
a = json.load(sys.stdin)["attachments"]; assert sorted(x["device"] for x in a) == ["rpcie0", "rpcie1"], a' ||
  die "status after detach --persist: $("$RPCIE" status -o json)"
"${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu1 >/dev/null || die "plain attach of edu1"
expect_rc 1 "detach --persist of an unconfigured device" "$RPCIE" detach -d rpcie2 --persist
grep -q "has no \[\[attach\]\] entry" "$TMP/err" || die "detach --persist without an entry: $(cat "$TMP/err")"
[ -L "$DEVDIR/rpcie2" ] || die "a refused detach --persist detached rpcie2"
"$RPCIE" detach -d rpcie2 >/dev/null || die "detach rpcie2"
restart_hostd fresh
python3 -c "import json; a = json.load(open('$TMP/status.json'))['attachments']
assert sorted(x['device'] for x in a) == ['rpcie0', 'rpcie1'], a" || die "after detach --persist and a restart: $(cat "$TMP/status.json")"
pass "detach --persist removes exactly its entry and the device; a refused one changes nothing; a restart keeps it gone"

# --- a configuration hostd cannot write: refused whole -----------------------------------
RO=$TMP/ro
mkdir -p "$RO"
if mount -t tmpfs -o size=1M tmpfs "$RO" 2>/dev/null; then
  CLEANUPS+=("umount -l $RO")
  cp "$CONF" "$RO/h.toml"
  mount -o remount,ro "$RO" || die "remount read-only"
  kill -TERM "$HOSTD_PID"
  wait "$HOSTD_PID" || die "hostd exit status on SIGTERM"
  HOSTD_ARGS=(--config "$RO/h.toml" --attach-timeout 4)
  stack_hostd_start
  wait_status 30 "all(a.get(d, {}).get('state') == 'connected' for d in ('rpcie0', 'rpcie1'))"
  expect_rc 1 "attach --persist to a read-only file" "${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu1 --persist
  grep -q "cannot write the configuration file $RO/h.toml: .*Read-only file system" "$TMP/err" ||
    die "read-only persist: $(cat "$TMP/err")"
  [ ! -L "$DEVDIR/rpcie2" ] || die "a refused attach --persist attached"
  pass "attach --persist with a read-only configuration: EROFS named, nothing attached"
else
  skip_check "cannot mount a tmpfs here: the read-only configuration check"
fi

# --- a stop while an entry is still being retried: prompt --------------------------------
kill -9 "$EXPORTD_B"
wait "$EXPORTD_B" 2>/dev/null
kill -TERM "$HOSTD_PID"
wait "$HOSTD_PID" || die "hostd exit status on SIGTERM"
rm -f "$STATE"
stack_hostd_start
wait_status 30 "a.get('rpcie0', {}).get('state') == 'connected' and a.get('rpcie1', {}).get('state') == 'restoring'"
kill -TERM "$HOSTD_PID"
deadline=$((SECONDS + 5))
while kill -0 "$HOSTD_PID" 2>/dev/null; do
  [ $SECONDS -ge $deadline ] && die "hostd still running 5 s after SIGTERM while retrying rpcie1"
  sleep 0.05
done
wait "$HOSTD_PID" || die "hostd exit status on SIGTERM while retrying"
pass "SIGTERM while a configured entry is being retried: hostd stops within 5 s, exit 0"
