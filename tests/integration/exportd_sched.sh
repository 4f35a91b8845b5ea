#!/usr/bin/env bash
# rpcie-exportd's data threads as the kernel sees them (rpcie-exportd(8), SCHEDULING): named
# rpcie-data; with --data-nice N at nice N with a 100 us slice; without it at the daemon's own
# nice value; and without the right to lower it (a user without CAP_SYS_NICE, RLIMIT_NICE 0)
# at the daemon's own, with one warning in the log for all attachments.
#   exportd_sched.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$1
EXPORTD=$B/devexport/rpcie-exportd RPCIE=$B/tools/rpcie DEVCHECK=$B/tests/rpcie-devcheck
[ "$(id -u)" = 0 ] || skip "needs root to run the exporter as another user"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
"$RPCIE" keygen "$TMP/psk" >/dev/null || die "keygen"
chmod 755 "$TMP"  # nobody's exporter reads its own copy of the key in it
install -m 600 -o nobody "$TMP/psk" "$TMP/nobody.psk" || die "nobody's key"

# exporter_start LOG KEY [SETPRIV...] -- EXPORTD_ARGS...: an exporter of edu0 and edu1 on
# loopback tcp with key file KEY; sets EXPORTER (its pid) and PORT.
exporter_start() {
  local log=$1 key=$2 as=()
  shift 2
  while [ "$1" != -- ]; do as+=("$1"); shift; done
  shift
  start_bg "${as[@]}" "$EXPORTD" --listen 127.0.0.1:0 --provider tcp --psk-file "$key" \
    --export edu0=edu --export edu1=edu "$@" 2>"$log"
  EXPORTER=$LAST_PID
  exportd_port_wait "$log" "$EXPORTER"
}

# data_threads N: holds N attachments (edu0, edu1) for 3 s and prints "NICE SLICE_NS" of
# each of the exporter's rpcie-data threads meanwhile.
data_threads() {
  local n=$1 i t deadline=$((SECONDS + 10)) holders=()
  for i in $(seq "$n"); do
    "$DEVCHECK" -r "127.0.0.1:$PORT" --psk-file "$TMP/psk" --provider tcp hold "edu$((i - 1))" 3 >"$TMP/hold$i.log" 2>&1 &
    holders+=($!)
  done
  until [ "$(grep -lx rpcie-data /proc/"$EXPORTER"/task/*/comm 2>/dev/null | wc -l)" -ge "$n" ]; do
    [ $SECONDS -ge $deadline ] && die "no $n rpcie-data threads: $(cat "$TMP"/hold*.log)"
    sleep 0.05
  done
  for t in $(grep -lx rpcie-data /proc/"$EXPORTER"/task/*/comm); do
    t=$(dirname "$t")
    # /proc/PID/task/TID/stat field 19 is the nice value (after the comm in parentheses).
    echo "$(sed 's/.*) //' "$t/stat" | awk '{print $17}') $(awk '/^se.slice/ {print $3}' "$t/sched")"
  done
  for i in "${holders[@]}"; do wait "$i" || die "an attachment failed: $(cat "$TMP"/hold*.log)"; done
}

# The daemon's own nice value and slice: its main thread's.
own() { echo "$(sed 's/.*) //' "/proc/$EXPORTER/stat" | awk '{print $17}') $(awk '/^se.slice/ {print $3}' "/proc/$EXPORTER/sched")"; }

exporter_start "$TMP/default.log" "$TMP/psk" --
out=$(data_threads 1)
[ "$out" = "$(own)" ] || die "without --data-nice the data thread runs at the daemon's nice value and slice ($(own)), got '$out'"
kill "$EXPORTER"
pass "without --data-nice: the daemon's own nice value and slice ($out)"

exporter_start "$TMP/nice.log" "$TMP/psk" -- --data-nice -7
out=$(data_threads 2 | sort -u)
[ "$out" = "-7 100000" ] || die "--data-nice -7: expected '-7 100000' for both data threads, got '$out'"
grep -q "data threads keep" "$TMP/nice.log" && die "a warning with the right to renice: $(cat "$TMP/nice.log")"
kill "$EXPORTER"
pass "--data-nice -7: both data threads at nice -7 with a 100 us slice"

exporter_start "$TMP/nobody.log" "$TMP/nobody.psk" setpriv --reuid nobody --regid nogroup --clear-groups -- \
  --data-nice -7
out=$(data_threads 2 | sort -u)
[ "$out" = "$(own)" ] || die "nobody's data threads: expected the daemon's own ($(own)), got '$out'"
[ "$(grep -c "data threads keep the daemon's nice value" "$TMP/nobody.log")" = 1 ] ||
  die "expected one warning for two attachments: $(cat "$TMP/nobody.log")"
grep -q "allow it with CAP_SYS_NICE or systemd's LimitNICE=, or set data-nice = 0" "$TMP/nobody.log" ||
  die "the warning does not say what to do: $(cat "$TMP/nobody.log")"
kill "$EXPORTER"
pass "without the right to renice: the daemon's own ($out), one warning for two attachments"
