#!/usr/bin/env bash
# Messages and RMA over tcp;ofi_rxm between two network namespaces joined by a veth pair.
#   selftest_netns.sh SELFTEST
#
#   netns rpcie-dev-$$            netns rpcie-cmp-$$
#   [selftest serve]              [selftest connect]
#    veth rd$$ 169.254.77.1/24 <==> veth rc$$ 169.254.77.2/24
. "$(dirname "$0")/lib.sh"
SELFTEST=$1
[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
DEV=rpcie-dev-$$ CMP=rpcie-cmp-$$
ip netns add "$DEV" 2>/dev/null || skip "cannot create network namespaces here"
CLEANUPS+=("ip netns del $DEV")
ip netns add "$CMP" || die "second namespace"
CLEANUPS+=("ip netns del $CMP")
ip link add "rd$$" netns "$DEV" type veth peer name "rc$$" netns "$CMP" || skip "cannot create a veth pair"
ip -n "$DEV" addr add 169.254.77.1/24 dev "rd$$"
ip -n "$CMP" addr add 169.254.77.2/24 dev "rc$$"
for ns in "$DEV" "$CMP"; do ip -n "$ns" link set lo up; done
ip -n "$DEV" link set "rd$$" up
ip -n "$CMP" link set "rc$$" up

start_bg nsenter --net="/run/netns/$DEV" "$SELFTEST" serve --listen 169.254.77.1:0 --sessions 1 \
  --port-file "$TMP/port" --provider tcp
server=$LAST_PID
wait_file "$TMP/port" 10 || die "server did not start"
timeout 60 nsenter --net="/run/netns/$CMP" "$SELFTEST" connect -r "169.254.77.1:$(cat "$TMP/port")" \
  --provider tcp -o json --size 16M >"$TMP/out" || die "client failed: $(cat "$TMP/out")"
cat "$TMP/out"
grep -q '"ok":true' "$TMP/out" || die "checks failed"
timeout 10 tail --pid="$server" -f /dev/null || die "server did not exit after its session"
wait "$server" || die "server exited with an error"
pass "selftest over tcp;ofi_rxm across a veth pair"
