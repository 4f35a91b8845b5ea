#!/usr/bin/env bash
# rpcie-bench runs briefly (one round, one size) and its -o json is what docs/rpcie-bench.md
# says: the transport rows (raw libfabric vs the core, both ends here) and the device rows
# (rpcie-exportd started by the bench, sealed data path) and the front-end rows (rpcie-hostd
# started by the bench, open data path), each with the medians, the spread
# of the round values and percentiles of both sides; scripts/bench-plot draws them as an SVG.
#   bench_json.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$1
BENCH=$B/tools/bench/rpcie-bench
PLOT=$(dirname "$0")/../../scripts/bench-plot
command -v python3 >/dev/null || skip "python3 is not installed"

# What every result has, whatever the mode: positive finite medians, ratio = rpcie/raw,
# min <= median <= max for both sides, p50 <= p99 <= p999 (us per operation), and what the
# percentiles are of. Imported by the checks below as `common`.
cat >"$TMP/common.py" <<'PY'
import math
def figures(r, sides=("raw", "rpcie")):
    for k in sides + ("ratio",):
        assert isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0, (k, r)
    tolerance = 1e-9
    for side in sides:
        low, median, high = r[side + "_min"], r[side], r[side + "_max"]
        assert low <= median * (1 + tolerance) and median <= high * (1 + tolerance), (side, "min/median/max", r)
        p50, p99, p999 = r[side + "_p50"], r[side + "_p99"], r[side + "_p999"]
        assert 0 < p50 <= p99 * (1 + tolerance) and p99 <= p999 * (1 + tolerance), (side, "percentiles", r)
    assert r["percentiles_of"] in ("operation", "slice"), r
PY

timeout 60 "$BENCH" --provider tcp --rounds 1 --sizes 4K -o json >"$TMP/transport.json" 2>"$TMP/transport.err" ||
  die "rpcie-bench (transport): exit $?: $(tail -n 5 "$TMP/transport.err")"
[ -s "$TMP/transport.err" ] && grep -q "rounds .* left" "$TMP/transport.err" &&
  die "rpcie-bench printed its progress line to a stderr that is not a terminal"
PYTHONPATH=$TMP python3 - "$TMP/transport.json" <<'PY' || die "transport JSON: $(cat "$TMP/transport.json")"
import json, sys, common
d = json.load(open(sys.argv[1]))
assert d["provider"] == "tcp;ofi_rxm" and d["rounds"] == 1 and d["rpcie_target"] == "busy-poll", d
assert isinstance(d["commit"], str) and d["commit"], d  # git describe of the build, or "unknown"
# The bulk rows on tcp depend on it (performance.md, issue 14 point 6): the host's, as read.
with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
    assert d["tcp_congestion_control"] == f.read().strip(), d
rows = {(r["workload"], r["size"]): r for r in d["results"]}
assert set(rows) == {("rma_write", 4096), ("rma_read", 4096), ("round_trip", 8)}, rows.keys()
for (w, _), r in rows.items():
    assert r["unit"] == ("us" if w == "round_trip" else "MB/s"), r
    common.figures(r)
    assert abs(r["ratio"] - r["rpcie"] / r["raw"]) < 1e-6 * r["ratio"], r
assert rows[("round_trip", 8)]["percentiles_of"] == "operation", rows[("round_trip", 8)]
assert rows[("rma_write", 4096)]["percentiles_of"] == "slice", rows[("rma_write", 4096)]
PY
pass "rpcie-bench -o json: transport rows, ratio = rpcie/raw, spread and percentiles ordered, targets both busy-poll"

# --only: the rows named and no other; a name the mode lacks is refused before anything runs.
timeout 60 "$BENCH" --provider tcp --rounds 1 --sizes 4K --only round_trip -o json >"$TMP/only.json" 2>"$TMP/only.err" ||
  die "rpcie-bench --only round_trip: exit $?: $(tail -n 5 "$TMP/only.err")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"]; assert [(x["workload"], x["size"]) for x in r] == [("round_trip", 8)], r' \
  "$TMP/only.json" || die "--only round_trip ran other rows: $(cat "$TMP/only.json")"
timeout 60 "$BENCH" --provider tcp --rounds 1 --sizes 4K --only round_trip,irq -o json >"$TMP/only-bad.json" 2>"$TMP/only-bad.err" &&
  die "--only with a row the transport lacks (irq) succeeded"
grep -qx "rpcie-bench: error: --only: no row named 'irq' here (rows: rma_write, rma_read, round_trip): Invalid argument" \
  "$TMP/only-bad.err" || die "--only irq on the transport: not the error expected: $(cat "$TMP/only-bad.err")"
[ -s "$TMP/only-bad.json" ] && die "--only refused, yet printed: $(cat "$TMP/only-bad.json")"
# The target was told to quit: no second error from a connection it found reset.
[ "$(wc -l <"$TMP/only-bad.err")" = 1 ] || die "--only refused: more than the one error line: $(cat "$TMP/only-bad.err")"
pass "rpcie-bench --only: the rows named alone; a row the mode lacks is refused naming the rows it has"

timeout 120 "$BENCH" --device --exportd "$B/devexport/rpcie-exportd" --provider tcp --rounds 1 -o json \
  >"$TMP/device.json" 2>"$TMP/device.err" || die "rpcie-bench --device: exit $?: $(tail -n 5 "$TMP/device.err")"
PYTHONPATH=$TMP python3 - "$TMP/device.json" <<'PY' || die "device JSON: $(cat "$TMP/device.json")"
import json, sys, common
d = json.load(open(sys.argv[1]))
assert d["provider"] == "tcp;ofi_rxm" and d["rounds"] == 1 and d["data_path"] == "sealed" and d["commit"], d
assert d["aead"]["seal_mbps"] > 0 and d["aead"]["open_mbps"] > 0 and d["aead"]["cipher"], d["aead"]
# Sealed bulk rows are measured against the raw loop's sealed messages, not raw RMA.
assert d["bulk_baseline"] == "sealed_messages", d
rows = {r["workload"]: r for r in d["results"]}
assert set(rows) == {"mmio_read", "bar_write", "bar_read", "edu_dma", "edu_dma_push", "edu_dma_to_ram"}, rows.keys()
for w, r in rows.items():
    common.figures(r)
    # Every device row runs one operation at a time on both sides: percentiles of operations.
    assert r["percentiles_of"] == "operation", r
for w in ("edu_dma", "edu_dma_push", "edu_dma_to_ram"):
    assert rows[w]["rpcie_with_ack"] >= rows[w]["rpcie"], rows[w]
PY
pass "rpcie-bench --device -o json: the six device rows, data path sealed, AEAD figures, percentiles of operations"

# The transport's share: the bar rows' raw side sends the same messages unsealed.
timeout 120 "$BENCH" --device --exportd "$B/devexport/rpcie-exportd" --provider tcp --rounds 1 --raw-cipher none -o json \
  >"$TMP/plain.json" 2>"$TMP/plain.err" || die "rpcie-bench --device --raw-cipher none: exit $?: $(tail -n 5 "$TMP/plain.err")"
PYTHONPATH=$TMP python3 - "$TMP/plain.json" <<'PY' || die "device JSON (--raw-cipher none): $(cat "$TMP/plain.json")"
import json, sys, common
d = json.load(open(sys.argv[1]))
assert d["data_path"] == "sealed" and d["bulk_baseline"] == "plain_messages", d
rows = {r["workload"]: r for r in d["results"]}
for w in ("bar_write", "bar_read"):
    common.figures(rows[w])
PY
rc=0
"$BENCH" --device --raw-cipher rc4 >"$TMP/usage.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "raw-cipher" "$TMP/usage.txt" || die "--raw-cipher rc4: exit $rc, want 2: $(cat "$TMP/usage.txt")"
pass "rpcie-bench --device --raw-cipher none: bar rows against unsealed messages; an unknown cipher is a usage error"

# The front end (rpcie-hostd, a real FUSE mount, started by the bench) against the client API
# on the open data path: every row with its figures, the mode named; the memcpy-against-memcpy
# dma_read/dma_write rows are gone.
if [ ! -e /dev/fuse ]; then
  skip_check "no /dev/fuse: rpcie-bench --frontend"
else
  timeout 120 "$BENCH" --frontend --rounds 1 --data-path open -o json >"$TMP/frontend.json" 2>"$TMP/frontend.err" ||
    die "rpcie-bench --frontend: exit $?: $(grep -v ': info: ' "$TMP/frontend.err" | tail -n 5)"
  PYTHONPATH=$TMP python3 - "$TMP/frontend.json" <<'PY' || die "frontend JSON: $(cat "$TMP/frontend.json")"
import json, sys, common
d = json.load(open(sys.argv[1]))
assert d["data_path"] == "open" and d["provider"] == "tcp" and d["rounds"] == 1 and d["splice_writes"] == "on", d
assert d["pipe_max_size"] == int(open("/proc/sys/fs/pipe-max-size").read()), d
rows = {r["workload"]: r for r in d["results"]}
assert set(rows) == {"reg_read", "bar_write", "bar_read", "bar_write_direct", "bar_read_direct", "bar_fault", "irq", "irq_loaded",
                     "map_load", "map_store", "map_burst", "map_memcpy", "plain"}, rows.keys()
for r in rows.values():
    common.figures(r, sides=("baseline", "frontend"))
    assert r["unit"] in ("us", "MB/s"), r
for w in ("bar_write", "bar_read", "bar_write_direct", "bar_read_direct"):
    assert rows[w]["size"] == 1 << 20 and rows[w]["unit"] == "MB/s" and (rows[w]["baseline_is"], rows[w]["frontend_is"]) == ("api", "file"), rows[w]
PY
  pass "rpcie-bench --frontend --data-path open: 13 rows with their figures, the data path named"
fi
"$BENCH" --help >"$TMP/help.txt" 2>&1 || die "rpcie-bench --help: exit $?"
grep -q "dma_read\|dma_write" "$TMP/help.txt" && die "rpcie-bench --help still lists dma_read/dma_write"
pass "rpcie-bench --help: no dma_read/dma_write rows"

if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then  # bench-plot's interpreter
  skip_check "python3-matplotlib is not installed (scripts/deps): scripts/bench-plot not checked"
else
  "$PLOT" "$TMP/transport.json" "$TMP/device.json" "$TMP/bench.svg" 2>"$TMP/plot.err" ||
    die "bench-plot: exit $?: $(cat "$TMP/plot.err")"
  python3 - "$TMP/bench.svg" <<'PY' || die "bench-plot: not a valid SVG: $(head -c 300 "$TMP/bench.svg")"
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag
text = open(sys.argv[1]).read()
assert text.count("<path") > 10, "too few paths: nothing drawn?"
PY
  "$PLOT" "$TMP/transport.json" 2>/dev/null && die "bench-plot with one argument: exit 0, expected 2"
  pass "scripts/bench-plot: the two documents as one valid SVG"
fi
