#!/usr/bin/env bash
# Messages and RMA over tcp;ofi_rxm between two network namespaces joined by a veth pair.
#   selftest_netns.sh SELFTEST
#
#   netns rpcie-dev-$$            netns rpcie-cmp-$$
#   [selftest serve]              [selftest connect]
#    veth vd$$ 169.254.77.1/24 <==> veth vc$$ 169.254.77.2/24
. "$(dirname "$0")/lib.sh"
SELFTEST=$1
netns_pair rpcie 169.254.77

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
