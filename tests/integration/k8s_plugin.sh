#!/usr/bin/env bash
# rpcie-k8s-plugin against a stub kubelet built from the plugin's own .proto files
# (k8s_kubelet_stub.cc): registration, the ListAndWatch stream, Allocate attaching through a
# real rpcie-hostd, a device another node holds reported unhealthy and not allocated, a
# restarted plugin adopting its attachment, release when the pod resources no longer list a
# device, health following the attachment when the exporter dies and comes back, and serving
# anew when the kubelet removes the plugin's socket.
#   k8s_plugin.sh BUILDDIR KUBELET_STUB
#
#   namespace rpciek-dev-PID           namespace rpciek-cmp-PID
#   ┌─────────────────────────┐  veth  ┌──────────────────────────────────────────────┐
#   │ rpcie-exportd edu0 edu1 │<------>│ rpcie-hostd (FUSE $TMP/mnt) <─ control ─┐    │
#   │ 169.254.99.1            │        │ rpcie-hostd --name othernode (edu1)     │    │
#   └─────────────────────────┘        │ rpcie-k8s-plugin ───────────────────────┘    │
#                                      └──────────────▲───────────────────────────────┘
#                                                     │ gRPC over UNIX sockets in $TMP/kubelet
#                         k8s-kubelet-stub serve $TMP/kubelet (kubelet.sock, pod-resources.sock)
# Nothing is written under /var/lib/kubelet or /etc/rpcie.
. "$(dirname "$0")/lib.sh"
B=$(realpath "$1")
STUB=$(realpath "$2")
PLUGIN=$B/tools/k8s-plugin/rpcie-k8s-plugin
[ -x "$PLUGIN" ] || die "$PLUGIN not built"
command -v jq >/dev/null || skip "jq is not installed (scripts/deps)"
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, FUSE)"
KDIR=$TMP/kubelet
mkdir -p "$KDIR"
: >"$KDIR/in-use"

# A bad configuration: FILE:LINE and exit 1 before anything is served; a bad option: exit 2.
printf 'resource = "edu"\n[[device]]\nhost = "h"\nexport = "e"\nport = 0\n' >"$TMP/bad.toml"
expect_rc 1 "bad configuration" "$PLUGIN" --config "$TMP/bad.toml" --kubelet-dir "$KDIR"
[ "$(cat "$TMP/err")" = "rpcie-k8s-plugin: error: $TMP/bad.toml:5: device: port: expected 1-65535" ] ||
  die "bad configuration message: $(cat "$TMP/err")"
[ ! -e "$KDIR/rpcie-edu.sock" ] || die "a bad configuration served a socket"
expect_rc 2 "unknown option" "$PLUGIN" --no-such-option
pass "a bad configuration file: exit 1 with FILE:LINE, nothing served; an unknown option: exit 2"

stack_start "$B" rpciek 169.254.99 edu0=edu edu1=edu
die() {
  echo "FAIL: $*" >&2
  for f in "$TMP/plugin.log" "$TMP/stub.log" "$KDIR/register.jsonl" "$KDIR/devices.jsonl"; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 20 "$f" >&2; }
  done
  stack_report
  exit 1
}

start_bg "$STUB" serve "$KDIR" 2>>"$TMP/stub.log"
deadline=$((SECONDS + 10))
until [ -S "$KDIR/kubelet.sock" ] && [ -S "$KDIR/pod-resources.sock" ]; do
  [ $SECONDS -ge $deadline ] && die "the stub kubelet did not start"
  sleep 0.05
done

cat >"$TMP/plugin.toml" <<EOF2
# rpcie-k8s-plugin test configuration
resource = "edu"
control = "$SOCK"
psk-file = "$TMP/psk"
check-interval = 0.5
release-grace = 1

[[device]]
host = "$HOST"
export = "edu0"

[[device]]
host = "$HOST"
port = 7385
export = "edu1"
id = "edu1-b"
EOF2
# plugin_start: the plugin, in the compute namespace (it asks the exporter who holds what).
plugin_start() {
  start_bg "${ON_CMP[@]}" "$PLUGIN" --config "$TMP/plugin.toml" --kubelet-dir "$KDIR" \
    --pod-resources "$KDIR/pod-resources.sock" 2>>"$TMP/plugin.log"
  PLUGIN_PID=$LAST_PID
}
# registrations_wait N: until the stub kubelet has had N Register requests.
registrations_wait() {
  local deadline=$((SECONDS + 10))
  until [ "$(wc -l <"$KDIR/register.jsonl" 2>/dev/null || echo 0)" -ge "$1" ]; do
    [ $SECONDS -ge $deadline ] && die "no registration number $1"
    sleep 0.05
  done
}
plugin_start

# --- registration and the first list ------------------------------------------------------
wait_file "$KDIR/register.jsonl" 15 || die "the plugin never registered"
jq -e '.version == "v1beta1" and .endpoint == "rpcie-edu.sock" and .resource_name == "rpcie.io/edu"
       and .get_preferred_allocation_available' "$KDIR/register.jsonl" >/dev/null ||
  die "Register request: $(cat "$KDIR/register.jsonl")"
[ -S "$KDIR/rpcie-edu.sock" ] || die "no plugin socket $KDIR/rpcie-edu.sock"
wait_file "$KDIR/devices.jsonl" 10 || die "no ListAndWatch list"
jq -e '.devices | map(.id) == ["edu0", "edu1-b"]' <(head -1 "$KDIR/devices.jsonl") >/dev/null ||
  die "first list: $(head -1 "$KDIR/devices.jsonl")"
jq -e '.pre_start_required == false and .get_preferred_allocation_available' "$KDIR/options.jsonl" >/dev/null ||
  die "GetDevicePluginOptions: $(cat "$KDIR/options.jsonl")"

# health_wait SECONDS ID HEALTH: until the stream's latest list shows ID as HEALTH.
health_wait() {
  local deadline=$((SECONDS + $1))
  until grep '"devices"' "$KDIR/devices.jsonl" | tail -n 1 | jq -e --arg id "$2" --arg h "$3" \
    '.devices | map(select(.id == $id))[0].health == $h' >/dev/null 2>&1; do
    [ $SECONDS -ge $deadline ] && die "ListAndWatch never showed $2 $3 within $1 s: $(tail -n 1 "$KDIR/devices.jsonl")"
    sleep 0.05
  done
}
health_wait 10 edu0 Healthy
health_wait 10 edu1-b Healthy
pass "registered (v1beta1, rpcie-edu.sock, rpcie.io/edu); ListAndWatch lists edu0 and edu1-b, both Healthy"

# attached_count EXPORT: how many of our hostd's attachments are of EXPORT.
attached_count() { "$RPCIE" status -o json | jq --arg e "$1" '[.attachments[] | select(.export == $e)] | length'; }
# detached_wait SECONDS EXPORT: until our hostd holds no attachment of EXPORT.
detached_wait() {
  local deadline=$((SECONDS + $1))
  until [ "$(attached_count "$2")" = 0 ]; do
    [ $SECONDS -ge $deadline ] && die "$2 still attached after $1 s: $("$RPCIE" status)"
    sleep 0.1
  done
}

# --- a device another node holds: unhealthy, and Allocate refuses it ------------------------
OTHER_SOCK=$TMP/other.sock
mkdir -p "$TMP/other-dev"
start_bg "${ON_CMP[@]}" "$HOSTD" --foreground --mount "$TMP/other-mnt" --control "$OTHER_SOCK" \
  --dev-dir "$TMP/other-dev" --psk-file "$TMP/psk" --provider tcp --timeout 2 --name othernode \
  --state-file "$TMP/other-state.json" 2>>"$TMP/other-hostd.log"
CLEANUPS+=("umount -l $TMP/other-mnt")
deadline=$((SECONDS + 10))
until "$RPCIE" status --control "$OTHER_SOCK" >/dev/null 2>&1; do
  [ $SECONDS -ge $deadline ] && die "the other node's hostd did not start"
  sleep 0.05
done
"${ON_CMP[@]}" "$RPCIE" attach --control "$OTHER_SOCK" -r "$HOST" -e edu1 >/dev/null || die "othernode: attach edu1"
health_wait 10 edu1-b Unhealthy
expect_rc 1 "Allocate of a device another node holds" "$STUB" allocate "$KDIR" rpcie-edu.sock edu1-b
grep -q "^9: .*busy" "$TMP/err" || die "Allocate of edu1-b: want FAILED_PRECONDITION (9), busy: $(cat "$TMP/err")"
[ "$(attached_count edu1)" = 0 ] || die "edu1 attached by our hostd too"
"$RPCIE" detach --control "$OTHER_SOCK" --all >/dev/null || die "othernode: detach"
health_wait 10 edu1-b Healthy
pass "edu1 held by another node: Unhealthy, Allocate refused (FAILED_PRECONDITION, busy), nothing attached here; Healthy once freed"

# --- Allocate: the device directory as a mount and RPCIE_DEVICE ----------------------------
echo edu0 >"$KDIR/in-use"
"$STUB" allocate "$KDIR" rpcie-edu.sock edu0 >"$TMP/alloc.json" 2>"$TMP/err" || die "Allocate edu0: $(cat "$TMP/err")"
P=$(jq -r '.[0].envs.RPCIE_DEVICE' "$TMP/alloc.json")
jq -e --arg p "$P" '.[0].mounts == [{"container_path": $p, "host_path": $p, "read_only": false}]
                    and .[0].envs.RPCIE_DEVICES == $p' "$TMP/alloc.json" >/dev/null ||
  die "Allocate response: $(cat "$TMP/alloc.json")"
[ -d "$P" ] || die "RPCIE_DEVICE $P is not a directory"
id=$(od -An -tx1 -N4 "$P/config" | tr -d ' \n')
[ "$id" = 3412e811 ] || die "$P/config starts $id, want edu's 1234:11e8 (3412e811)"
"$RPCIE" status -o json | jq -e --arg p "$P" '[.attachments[] | select(.export == "edu0" and .sysfs == $p
  and .state == "connected")] | length == 1' >/dev/null || die "hostd status: $("$RPCIE" status)"
pass "Allocate edu0: mount and RPCIE_DEVICE=$P, a directory whose config is edu's (1234:11e8), connected in hostd"

# A restarted plugin adopts hostd's attachment of a pool device (and releases it by the same rule).
kill -TERM "$PLUGIN_PID"
wait "$PLUGIN_PID" || die "the plugin's exit status on SIGTERM"
[ "$(attached_count edu0)" = 1 ] || die "stopping the plugin detached edu0: $("$RPCIE" status)"
plugin_start
registrations_wait 2
grep -q "edu0: adopted hostd's" "$TMP/plugin.log" || die "the restarted plugin did not adopt edu0"
pass "the plugin stopped and started again: edu0 stays attached and is adopted"
# Kept while the pod resources list it (a quiet interval: three checks and the grace).
sleep 2.5
[ "$(attached_count edu0)" = 1 ] || die "edu0 detached while in use: $("$RPCIE" status)"
: >"$KDIR/in-use"
detached_wait 10 edu0
pass "edu0 kept while the pod resources list it, detached once they do not"

# --- Allocate again, then health while the exporter is gone --------------------------------
echo edu0 >"$KDIR/in-use"
"$STUB" allocate "$KDIR" rpcie-edu.sock edu0 >"$TMP/alloc.json" 2>"$TMP/err" || die "Allocate edu0: $(cat "$TMP/err")"
"$STUB" allocate "$KDIR" rpcie-edu.sock edu0 >"$TMP/alloc2.json" 2>"$TMP/err" || die "Allocate edu0 again: $(cat "$TMP/err")"
[ "$(attached_count edu0)" = 1 ] || die "a second Allocate of edu0 left $(attached_count edu0) attachments"
health_wait 10 edu0 Healthy
kill -9 "$EXPORTD_PID"
wait "$EXPORTD_PID" 2>/dev/null  # reaped here: no "Killed" line from bash
health_wait 15 edu0 Unhealthy
health_wait 10 edu1-b Unhealthy
pass "a second Allocate replaces the attachment (one left); the exporter killed: edu0 and edu1-b Unhealthy"
: >"$KDIR/in-use"
detached_wait 15 edu0
stack_exportd_start
health_wait 15 edu0 Healthy
health_wait 15 edu1-b Healthy
pass "unlisted edu0 detached with its exporter down; the exporter back: both Healthy again"

# --- the kubelet restarts: it removes the plugins' sockets; the plugin serves anew, registers again
lists=$(grep -c '"devices"' "$KDIR/devices.jsonl")
regs=$(wc -l <"$KDIR/register.jsonl")
rm "$KDIR/rpcie-edu.sock"
registrations_wait $((regs + 1))
deadline=$((SECONDS + 10))
until [ "$(grep -c '"devices"' "$KDIR/devices.jsonl")" -gt "$lists" ]; do
  [ $SECONDS -ge $deadline ] && die "no new ListAndWatch list after the socket was removed"
  sleep 0.05
done
[ -S "$KDIR/rpcie-edu.sock" ] || die "no new socket $KDIR/rpcie-edu.sock"
tail -n 1 "$KDIR/register.jsonl" | jq -e '.endpoint == "rpcie-edu.sock"' >/dev/null || die "second Register: $(tail -n 1 "$KDIR/register.jsonl")"
health_wait 10 edu0 Healthy
pass "socket removed (a kubelet restart): served anew, registered again, a new ListAndWatch with edu0 Healthy"

# --- stop ----------------------------------------------------------------------------------
kill -TERM "$PLUGIN_PID"
wait "$PLUGIN_PID" || die "the plugin's exit status on SIGTERM"
[ ! -e "$KDIR/rpcie-edu.sock" ] || die "the plugin left its socket behind"
pass "SIGTERM: exit 0, socket removed"
