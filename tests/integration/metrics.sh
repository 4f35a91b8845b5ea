#!/usr/bin/env bash
# Telemetry end to end (issue 15 point 3): rpcie-exportd and rpcie-hostd with --metrics,
# known I/O through hostd's files, then the counters and histograms as /metrics, `rpcie
# status -o json` and `rpcie top` show them, promtool's verdict on both expositions, and a
# real Prometheus server scraping both.
#   metrics.sh BUILDDIR
#
#   netns rpciem-dev (169.254.98.1)          netns rpciem-cmp (169.254.98.2)
#   rpcie-exportd  :7385                     rpcie-hostd (FUSE at $MNT)
#                  --metrics .1:9102  <----  prometheus --web.listen-address 127.0.0.1:9190
#                                            scrapes .1:9102 and .2:9101 (hostd --metrics)
. "$(dirname "$0")/lib.sh"
B=$1
CHECK="python3 $(dirname "$0")/metrics_check.py"
for tool in python3 curl promtool prometheus; do
  command -v $tool >/dev/null || skip "$tool is not installed (scripts/deps installs it)"
done
SUBNET=169.254.98
HOSTD_METRICS=$SUBNET.2:9101 EXPORTD_METRICS=$SUBNET.1:9102
HOSTD_ARGS=(--metrics "$HOSTD_METRICS")
EXPORTD_ARGS=(--metrics "$EXPORTD_METRICS")
stack_start "$B" rpciem "$SUBNET" edu0=edu mem0=membar,size=16M

# --- bad --metrics values: usage errors (2), a port in use: 1 --------------------------------
# Each daemon bounded: one that took a bad value and served would never exit (timeout: 124).
for bad in 127.0.0.1 localhost:9100 "::1:9100" "[::1]" 127.0.0.1:65536 1.2.3:4; do
  expect_rc 2 "rpcie-hostd --metrics $bad" timeout 20 "$HOSTD" --foreground --mount "$TMP/nomnt" --control "$TMP/no.sock" \
    --psk-file "$TMP/psk" --metrics "$bad"
  grep -q -- "--metrics" "$TMP/err" || die "hostd --metrics $bad: no clear message: $(cat "$TMP/err")"
  expect_rc 2 "rpcie-exportd --metrics $bad" timeout 20 "$EXPORTD" --listen 127.0.0.1:0 --psk-file "$TMP/psk" \
    --export x=membar --metrics "$bad"
  grep -q -- "--metrics" "$TMP/err" || die "exportd --metrics $bad: no clear message: $(cat "$TMP/err")"
done
# hostd holds $HOSTD_METRICS in the compute namespace.
expect_rc 1 "rpcie-exportd --metrics on a port in use" timeout 20 "${ON_CMP[@]}" "$EXPORTD" --listen 127.0.0.1:0 \
  --psk-file "$TMP/psk" --export x=membar --metrics "$HOSTD_METRICS"
grep -q "Address already in use" "$TMP/err" || die "port in use: $(cat "$TMP/err")"
# exportd holds $EXPORTD_METRICS in the device namespace; a hostd there ends its start-up.
mkdir -p "$TMP/mnt2" "$TMP/dev2"
CLEANUPS+=("grep -q ' $TMP/mnt2 ' /proc/mounts && umount -l $TMP/mnt2")
# Bounded: a hostd that went on serving without its metrics would never exit (timeout: 124).
expect_rc 1 "rpcie-hostd --metrics on a port in use" timeout 20 "${ON_DEV[@]}" "$HOSTD" --foreground --mount "$TMP/mnt2" \
  --control "$TMP/h2.sock" --dev-dir "$TMP/dev2" --psk-file "$TMP/psk" --state-file '' --metrics "$EXPORTD_METRICS"
grep -q "rpcie-hostd: error: --metrics: .*Address already in use" "$TMP/err" || die "hostd, port in use: $(cat "$TMP/err")"
! grep -q " $TMP/mnt2 " /proc/mounts || die "hostd left its mount behind after failing to start"
pass "--metrics: malformed addresses exit 2 with a message, a port in use exits 1"

J0=$("${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu0 -o json) || die "attach edu0"
JM=$("${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e mem0 -o json) || die "attach mem0"
D0=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["sysfs"])' <<<"$J0")
DM=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["sysfs"])' <<<"$JM")
# A second attach of edu0 is refused (busy): counted by reason.
"${ON_CMP[@]}" "$RPCIE" attach -r "$HOST" -e edu0 >/dev/null 2>&1 && die "a second attach of edu0 succeeded"

# scrape NAME: both expositions into $TMP/NAME.hostd and $TMP/NAME.exportd.
scrape() {
  "${ON_CMP[@]}" curl -sS --fail --max-time 5 "http://$HOSTD_METRICS/metrics" >"$TMP/$1.hostd" || die "scrape hostd"
  "${ON_CMP[@]}" curl -sS --fail --max-time 5 "http://$EXPORTD_METRICS/metrics" >"$TMP/$1.exportd" ||
    die "scrape exportd"
}
val() { $CHECK value "$@" || die "metric $2 ${*:3} in $1"; }

# --- known I/O: exactly 100 register reads of edu0, 1 MiB each way on mem0's memory BAR -------
scrape before
"$RPCIE" status -o json >"$TMP/status0.json" || die "status"
read -r st_reads0 st_hist0 _ < <($CHECK status "$TMP/status0.json" rpcie0) || die "status histograms (before)"
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
for _ in range(100):
    assert os.pread(fd, 4, 0) == bytes.fromhex("ed000001"), "edu ID"
' "$D0/resource0" || die "100 reads of edu0"
head -c $((1 << 20)) /dev/urandom >"$TMP/mib"
dd if="$TMP/mib" of="$DM/resource0" bs=1M count=1 conv=notrunc,fsync status=none || die "1 MiB write to mem0"
dd if="$DM/resource0" of="$TMP/mib.back" bs=1M count=1 iflag=direct status=none 2>/dev/null ||
  dd if="$DM/resource0" of="$TMP/mib.back" bs=1M count=1 status=none || die "1 MiB read of mem0"
cmp -s "$TMP/mib" "$TMP/mib.back" || die "mem0 read back differs"
scrape after
"$RPCIE" status -o json >"$TMP/status1.json" || die "status"
read -r st_reads1 st_hist1 _ < <($CHECK status "$TMP/status1.json" rpcie0) || die "status histograms (after)"

delta() { echo $(($(val "$TMP/after.$1" "${@:2}") - $(val "$TMP/before.$1" "${@:2}"))); }
d=$(delta hostd rpcie_device_mmio_reads_total device=rpcie0 export=edu0 "exporter=$HOST:7385")
[ "$d" = 100 ] || die "hostd rpcie_device_mmio_reads_total of rpcie0 rose by $d, want 100"
d=$(delta hostd rpcie_device_latency_seconds_count device=rpcie0 op=mmio_read)
[ "$d" = 100 ] || die "hostd rpcie_device_latency_seconds_count{op=mmio_read} of rpcie0 rose by $d, want 100"
d=$(delta hostd rpcie_device_latency_seconds_bucket device=rpcie0 op=mmio_read le=+Inf)
[ "$d" = 100 ] || die "hostd latency +Inf bucket of rpcie0 rose by $d, want 100"
d=$(delta exportd rpcie_export_requests_total export=edu0 kind=mmio_read)
[ "$d" = 100 ] || die "exportd rpcie_export_requests_total{export=edu0,kind=mmio_read} rose by $d, want 100"
[ $((st_reads1 - st_reads0)) = 100 ] && [ $((st_hist1 - st_hist0)) = 100 ] && [ "$st_reads1" = "$st_hist1" ] ||
  die "status -o json: mmio_reads $st_reads0 -> $st_reads1, latency.mmio_read.count $st_hist0 -> $st_hist1"
pass "100 register reads: +100 on hostd's counter and histogram, exportd's requests and status -o json"

[ "$(delta hostd rpcie_device_bar_written_bytes_total device=rpcie1)" -ge $((1 << 20)) ] || die "bar bytes written"
[ "$(delta hostd rpcie_device_bar_read_bytes_total device=rpcie1)" -ge $((1 << 20)) ] || die "bar bytes read"
[ "$(delta hostd rpcie_device_latency_seconds_count device=rpcie1 op=bar_write)" -ge 1 ] || die "bar_write histogram"
[ "$(delta hostd rpcie_device_latency_seconds_count device=rpcie1 op=bar_read)" -ge 1 ] || die "bar_read histogram"
pass "1 MiB each way on a memory BAR: bytes and bulk histograms"

# --- edu's DMA and interrupts: the exporter's DMA and interrupt histograms, hostd's delivery ---
# 4 round trips through edu's DMA engine (window -> device: the exporter's DMA read; device
# -> window: its DMA write; an interrupt after each) and 2 factorials with an interrupt,
# each interrupt awaited by a blocking read of events: 10 interrupts, one at a time.
DMA_ROUNDS=4 FACTORIALS=2
scrape dma0
"$RPCIE" status -o json >"$TMP/status2.json" || die "status"
read -r _ _ st_irq0 st_del0 t_rd0 t_wr0 t_pull0 t_irq0 t_bytes0 < <($CHECK status "$TMP/status2.json" rpcie0) ||
  die "status histograms (before DMA)"
irqs=$($CHECK edu "$D0" $DMA_ROUNDS $FACTORIALS) || die "edu DMA and interrupts through hostd's files"
[ "$irqs" = $((2 * DMA_ROUNDS + FACTORIALS)) ] || die "edu: $irqs interrupts"
scrape dma1
"$RPCIE" status -o json >"$TMP/status3.json" || die "status"
read -r _ _ st_irq1 st_del1 t_rd1 t_wr1 t_pull1 t_irq1 t_bytes1 < <($CHECK status "$TMP/status3.json" rpcie0) ||
  die "status histograms (after DMA)"
ddelta() { echo $(($(val "$TMP/dma1.$1" "${@:2}") - $(val "$TMP/dma0.$1" "${@:2}"))); }
# Sums are seconds: compared as numbers by python (the shell has integers only).
dsum() { python3 -c 'import sys; print(float(sys.argv[1]) - float(sys.argv[2]) > 0)' \
  "$(val "$TMP/dma1.$1" "${@:2}")" "$(val "$TMP/dma0.$1" "${@:2}")"; }
# The mean of a histogram's records between the scrapes, in microseconds (for the log only).
dmean() { python3 -c 'import sys; print("%.0f us" % ((float(sys.argv[1]) - float(sys.argv[2])) * 1e6 / int(sys.argv[3])))' \
  "$(val "$TMP/dma1.$1" "${@:3}")" "$(val "$TMP/dma0.$1" "${@:3}")" "$2"; }
E="export=edu0 backend=edu"
for op in dma_read dma_write; do
  d=$(ddelta exportd rpcie_export_latency_seconds_count $E op=$op)
  [ "$d" = $DMA_ROUNDS ] || die "exportd rpcie_export_latency_seconds_count{op=$op} of edu0 rose by $d, want $DMA_ROUNDS"
  d=$(ddelta exportd rpcie_export_latency_seconds_bucket $E op=$op le=+Inf)
  [ "$d" = $DMA_ROUNDS ] || die "exportd latency +Inf bucket {op=$op} of edu0 rose by $d, want $DMA_ROUNDS"
  [ "$(dsum exportd rpcie_export_latency_seconds_sum $E op=$op)" = True ] || die "exportd {op=$op}: sum did not grow"
done
d=$(ddelta exportd rpcie_export_dma_read_bytes_total $E)
[ "$d" = $((DMA_ROUNDS * 4096)) ] || die "exportd DMA read bytes of edu0 rose by $d"
d=$(ddelta exportd rpcie_export_interrupts_total $E)
[ "$d" = "$irqs" ] || die "exportd rpcie_export_interrupts_total of edu0 rose by $d, want $irqs"
d=$(ddelta exportd rpcie_export_latency_seconds_count $E op=interrupt)
[ "$d" = "$irqs" ] || die "exportd rpcie_export_latency_seconds_count{op=interrupt} of edu0 rose by $d, want $irqs"
[ "$(dsum exportd rpcie_export_latency_seconds_sum $E op=interrupt)" = True ] || die "exportd {op=interrupt}: sum"
# edu0 is an on-demand export: the device reads the window itself, nothing is pulled.
[ "$(val "$TMP/dma1.exportd" rpcie_export_latency_seconds_count $E op=window_pull)" = 0 ] ||
  die "exportd window_pull recorded on an on-demand export"
pass "edu: $DMA_ROUNDS DMA reads and writes and $irqs interrupts, each counted once in exportd's histograms" \
  "(means: dma_read $(dmean exportd $DMA_ROUNDS rpcie_export_latency_seconds_sum $E op=dma_read)," \
  "dma_write $(dmean exportd $DMA_ROUNDS rpcie_export_latency_seconds_sum $E op=dma_write)," \
  "interrupt $(dmean exportd "$irqs" rpcie_export_latency_seconds_sum $E op=interrupt))"

d=$(ddelta hostd rpcie_device_interrupts_total device=rpcie0)
[ "$d" = "$irqs" ] || die "hostd rpcie_device_interrupts_total of rpcie0 rose by $d, want $irqs"
d=$(ddelta hostd rpcie_device_latency_seconds_count device=rpcie0 op=interrupt_delivery)
[ "$d" = "$irqs" ] || die "hostd {op=interrupt_delivery} count of rpcie0 rose by $d, want $irqs"
d=$(ddelta hostd rpcie_device_latency_seconds_bucket device=rpcie0 op=interrupt_delivery le=+Inf)
[ "$d" = "$irqs" ] || die "hostd {op=interrupt_delivery} +Inf bucket of rpcie0 rose by $d, want $irqs"
[ "$(dsum hostd rpcie_device_latency_seconds_sum device=rpcie0 op=interrupt_delivery)" = True ] ||
  die "hostd {op=interrupt_delivery}: sum did not grow"
[ "$(val "$TMP/dma1.hostd" rpcie_device_latency_seconds_count device=rpcie1 op=interrupt_delivery)" = 0 ] ||
  die "hostd: interrupt deliveries on mem0, which raised none"
[ $((st_irq1 - st_irq0)) = "$irqs" ] && [ $((st_del1 - st_del0)) = "$irqs" ] ||
  die "status -o json: interrupts $st_irq0 -> $st_irq1, latency.interrupt_delivery.count $st_del0 -> $st_del1"
pass "hostd: $irqs interrupts, $irqs deliveries timed in /metrics and status -o json" \
  "(mean $(dmean hostd "$irqs" rpcie_device_latency_seconds_sum device=rpcie0 op=interrupt_delivery))"

# The exporter's figures of this attachment, asked through hostd (telemetry_request).
[ $((t_rd1 - t_rd0)) = $DMA_ROUNDS ] && [ $((t_wr1 - t_wr0)) = $DMA_ROUNDS ] ||
  die "status -o json: device_telemetry dma_read $t_rd0 -> $t_rd1, dma_write $t_wr0 -> $t_wr1, want +$DMA_ROUNDS"
[ $((t_irq1 - t_irq0)) = "$irqs" ] || die "status -o json: device_telemetry interrupt $t_irq0 -> $t_irq1, want +$irqs"
[ "$t_pull1" = 0 ] || die "status -o json: device_telemetry window_pull $t_pull1 on an on-demand export"
[ $((t_bytes1 - t_bytes0)) = $((DMA_ROUNDS * 4096)) ] ||
  die "status -o json: device_telemetry dma_read_bytes $t_bytes0 -> $t_bytes1"
# The attachment's own figures equal the export's (one attachment since exportd started).
[ "$t_rd1" = "$(val "$TMP/dma1.exportd" rpcie_export_latency_seconds_count $E op=dma_read)" ] ||
  die "device_telemetry dma_read $t_rd1 differs from exportd's"
pass "status -o json: the exporter's device telemetry of rpcie0: +$DMA_ROUNDS DMA reads and writes," \
  "+$irqs interrupts, no window pull"
# Without device_telemetry (the default op, as hostd's own watchdog asks it) no exporter is asked.
python3 - "$SOCK" <<'PY' || die "status without device_telemetry"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"op":"status"}\n')
a = json.loads(s.makefile().readline())
assert all("device_telemetry" not in x for x in a["attachments"]), a
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b'{"op":"status","device_telemetry":1}\n')
a = json.loads(s.makefile().readline())
assert a.get("errno") == 22 and "device_telemetry" in a["error"], a
PY
pass "status: device_telemetry only when asked; a non-boolean is EINVAL"

[ "$(val "$TMP/after.hostd" rpcie_devices_attached)" = 2 ] || die "rpcie_devices_attached"
[ "$(val "$TMP/after.hostd" rpcie_device_generation device=rpcie0)" = 1 ] || die "generation of rpcie0"
[ "$(val "$TMP/after.hostd" rpcie_device_connected device=rpcie1)" = 1 ] || die "rpcie1 not connected"
[ "$(val "$TMP/after.exportd" rpcie_export_attachments export=edu0)" = 1 ] || die "exportd attachments of edu0"
[ "$(val "$TMP/after.exportd" rpcie_export_attaches_total export=edu0)" = 1 ] || die "exportd attaches of edu0"
[ "$(val "$TMP/after.exportd" rpcie_export_attaches_refused_total export=edu0 reason=busy)" = 1 ] ||
  die "exportd busy refusals of edu0"
[ "$(val "$TMP/after.exportd" rpcie_export_lease_lapses_total export=mem0)" = 0 ] || die "lease lapses of mem0"
pass "gauges and refusals: 2 devices, generation 1, one attach and one busy refusal of edu0"

for f in after.hostd after.exportd dma1.hostd dma1.exportd; do
  promtool check metrics <"$TMP/$f" >"$TMP/promtool.out" 2>&1 || die "promtool check metrics $f: $(cat "$TMP/promtool.out")"
done
code=$("${ON_CMP[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$HOSTD_METRICS/other")
[ "$code" = 404 ] || die "GET /other answered $code"
code=$("${ON_CMP[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "http://$EXPORTD_METRICS/metrics")
[ "$code" = 405 ] || die "POST /metrics answered $code"
pass "promtool check metrics passes both expositions; 404 and 405 where due"

# --- rpcie top: two frames while reads go on ---------------------------------------------------
python3 -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
end = time.monotonic() + 2.5
while time.monotonic() < end:
    os.pread(fd, 4, 0)
' "$D0/resource0" &
reader=$!
"$RPCIE" top --count 2 --interval 0.5 >"$TMP/top.out" 2>"$TMP/top.err" || die "rpcie top: $(cat "$TMP/top.err")"
wait $reader || die "reads during top"
python3 - "$TMP/top.out" <<'PY' || die "rpcie top output: $(cat "$TMP/top.out")"
import re, sys
frames = open(sys.argv[1]).read().split("\n\n")
assert len(frames) == 2, frames
for f in frames:
    lines = f.strip("\n").split("\n")
    assert lines[0].startswith("rpcie top: 2 devices, rates over "), lines
    assert re.match(r"DEVICE +EXPORT +STATE +READS/s +WRITES/s +MB/s +IRQ/s +RD_P50 +RD_P99 +IRQ_P99 +DMA/s +DMA_P99$",
                    lines[1]), lines
    rows = {l.split()[0]: l.split() for l in lines[2:]}
    assert set(rows) == {"rpcie0", "rpcie1"}, rows
    r = rows["rpcie0"]
    assert r[1] == "edu0" and r[2] == "connected", r
    assert float(r[3]) > 10, r  # reads/s while the reader runs
    assert re.match(r"^\d+(us|ms)$", r[7]) and re.match(r"^\d+(us|ms)$", r[8]), r
    assert rows["rpcie1"][7] == "-", rows["rpcie1"]  # no register reads on mem0
    assert r[9] == "-" and rows["rpcie1"][9] == "-", rows  # no interrupts meanwhile
    assert r[10] == "0.0" and r[11] == "-", r  # nor DMA
PY
pass "rpcie top --count 2: two frames, a line per device, read rate and p50/p99"

# IRQ_P99 and DMA_P99 while edu moves data and raises interrupts: its DMA engine both ways and
# a factorial, each with an interrupt, for 2.5 s.
(
  end=$((SECONDS + 3))
  while [ $SECONDS -lt $end ]; do $CHECK edu "$D0" 10 1 >/dev/null || exit 1; done
) &
raiser=$!
"$RPCIE" top --count 2 --interval 0.5 >"$TMP/top2.out" 2>"$TMP/top.err" || die "rpcie top: $(cat "$TMP/top.err")"
wait $raiser || die "DMA and interrupts during top"
python3 - "$TMP/top2.out" <<'PY' || die "rpcie top output (DMA and interrupts): $(cat "$TMP/top2.out")"
import re, sys
for f in open(sys.argv[1]).read().split("\n\n"):
    rows = {l.split()[0]: l.split() for l in f.strip("\n").split("\n")[2:]}
    r = rows["rpcie0"]
    assert float(r[6]) > 10 and re.match(r"^\d+(us|ms)$", r[9]), r  # IRQ/s and IRQ_P99
    assert float(r[10]) > 10 and re.match(r"^\d+(us|ms)$", r[11]), r  # DMA/s and DMA_P99 (the exporter's)
    assert rows["rpcie1"][10] == "0.0" and rows["rpcie1"][11] == "-", rows["rpcie1"]
PY
pass "rpcie top: IRQ/s, IRQ_P99, DMA/s and DMA_P99 while edu moves data and raises interrupts"


# --- a real Prometheus server scraping both daemons --------------------------------------------
scrape final
want_reads=$(val "$TMP/final.hostd" rpcie_device_mmio_reads_total device=rpcie0)
want_requests=$(val "$TMP/final.exportd" rpcie_export_requests_total export=edu0 kind=mmio_read)
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: hostd
    static_configs: [{targets: ['$HOSTD_METRICS']}]
  - job_name: exportd
    static_configs: [{targets: ['$EXPORTD_METRICS']}]
YML
PROM=http://127.0.0.1:9190
start_bg "${ON_CMP[@]}" prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/prom" \
  --web.listen-address=127.0.0.1:9190 2>"$TMP/prometheus.log"
query() { "${ON_CMP[@]}" $CHECK query "$PROM" "$1" 2>/dev/null || echo none; }
deadline=$((SECONDS + 30))
until [ "$(query 'rpcie_device_mmio_reads_total{device="rpcie0"}')" = "$want_reads" ] &&
  [ "$(query 'rpcie_export_requests_total{export="edu0",kind="mmio_read"}')" = "$want_requests" ]; do
  [ $SECONDS -ge $deadline ] && die "prometheus: rpcie_device_mmio_reads_total $(query 'rpcie_device_mmio_reads_total{device="rpcie0"}') (want $want_reads), rpcie_export_requests_total $(query 'rpcie_export_requests_total{export="edu0",kind="mmio_read"}') (want $want_requests) after 30 s; $(tail -n 5 "$TMP/prometheus.log")"
  sleep 0.5
done
[ "$(query 'up{job="hostd"}')" = 1 ] && [ "$(query 'up{job="exportd"}')" = 1 ] || die "prometheus: a target is not up"
[ "$(query 'sum(rpcie_device_latency_seconds_count{device="rpcie0",op="mmio_read"})')" = "$want_reads" ] ||
  die "prometheus: histogram count of rpcie0"
pass "prometheus scraped both daemons: reads $want_reads, exporter requests $want_requests, histogram count, up"
