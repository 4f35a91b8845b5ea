#!/usr/bin/env bash
# Messages and RMA with checksum verification between two processes on loopback.
#   selftest_loopback.sh SELFTEST PROVIDER [CONNECT-ARGS...]   e.g. --max-transfer 64K, --no-saw
#
#   [rpcie-selftest serve] <== 127.0.0.1, PROVIDER ==> [rpcie-selftest connect]
. "$(dirname "$0")/lib.sh"
SELFTEST=$1 PROVIDER=$2
shift 2
EXTRA=("$@")

start_bg "$SELFTEST" serve --listen 127.0.0.1:0 --sessions 1 --port-file "$TMP/port" --provider "$PROVIDER"
server=$LAST_PID
wait_file "$TMP/port" 10 || die "server did not start"
args=(connect -r "127.0.0.1:$(cat "$TMP/port")" --provider "$PROVIDER" -o json --size 16M)
args+=("${EXTRA[@]}")
timeout 60 "$SELFTEST" "${args[@]}" >"$TMP/out" || die "client failed: $(cat "$TMP/out")"
cat "$TMP/out"
grep -q '"ok":true' "$TMP/out" || die "checks failed"
for c in messages malformed rma_write rma_read rma_bounds; do
  grep -q "\"name\":\"$c\",\"ok\":true" "$TMP/out" || grep -q "\"detail\":\"[^\"]*\",\"name\":\"$c\",\"ok\":true" "$TMP/out" || die "check $c did not pass"
done
if [[ " ${EXTRA[*]} " == *" --max-transfer "* ]]; then
  # 16 MiB written and read back in chunks: the split must have happened.
  chunks=$(sed -n 's/.*"rma_chunks":\([0-9]*\).*/\1/p' "$TMP/out")
  [ "${chunks:-0}" -ge 2 ] || die "transfer was not split (chunks=$chunks)"
fi
timeout 10 tail --pid="$server" -f /dev/null || die "server did not exit after its session"
wait "$server" || die "server exited with an error"
if [[ " ${EXTRA[*]} " == *" --no-saw "* ]]; then
  grep -q '"ordering":"delivery_complete"' "$TMP/out" || die "delivery-complete ordering was not used"
fi
pass "selftest over $PROVIDER ${EXTRA[*]}"
