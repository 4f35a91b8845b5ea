#!/usr/bin/env bash
# rpcie-bench runs briefly (one round, one size) and its -o json is what docs/rpcie-bench.md
# says: the transport rows (raw libfabric vs the core, both ends here) and the device rows
# (rpcie-exportd started by the bench, sealed data path).
#   bench_json.sh BUILDDIR
. "$(dirname "$0")/lib.sh"
B=$1
BENCH=$B/tools/bench/rpcie-bench
command -v python3 >/dev/null || skip "python3 is not installed"

timeout 60 "$BENCH" --provider tcp --rounds 1 --sizes 4K -o json >"$TMP/transport.json" 2>"$TMP/transport.err" ||
  die "rpcie-bench (transport): exit $?: $(tail -n 5 "$TMP/transport.err")"
python3 - "$TMP/transport.json" <<'PY' || die "transport JSON: $(cat "$TMP/transport.json")"
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["provider"] == "tcp;ofi_rxm" and d["rounds"] == 1, d
rows = {(r["workload"], r["size"]): r for r in d["results"]}
assert set(rows) == {("rma_write", 4096), ("rma_read", 4096), ("round_trip", 8)}, rows.keys()
for (w, _), r in rows.items():
    assert r["unit"] == ("us" if w == "round_trip" else "MB/s"), r
    assert all(isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0 for k in ("raw", "rpcie", "ratio")), r
    assert abs(r["ratio"] - r["rpcie"] / r["raw"]) < 1e-6 * r["ratio"], r
PY
pass "rpcie-bench -o json: transport rows (rma_write, rma_read 4 KiB, round_trip), positive figures, ratio = rpcie/raw"

timeout 120 "$BENCH" --device --exportd "$B/devexport/rpcie-exportd" --provider tcp --rounds 1 -o json \
  >"$TMP/device.json" 2>"$TMP/device.err" || die "rpcie-bench --device: exit $?: $(tail -n 5 "$TMP/device.err")"
python3 - "$TMP/device.json" <<'PY' || die "device JSON: $(cat "$TMP/device.json")"
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d["provider"] == "tcp;ofi_rxm" and d["rounds"] == 1 and d["data_path"] == "sealed", d
assert d["aead"]["seal_mbps"] > 0 and d["aead"]["open_mbps"] > 0 and d["aead"]["cipher"], d["aead"]
rows = {r["workload"]: r for r in d["results"]}
assert set(rows) == {"mmio_read", "bar_write", "bar_read", "edu_dma", "edu_dma_push"}, rows.keys()
for w, r in rows.items():
    assert all(isinstance(r[k], (int, float)) and math.isfinite(r[k]) and r[k] > 0 for k in ("raw", "rpcie", "ratio")), r
for w in ("edu_dma", "edu_dma_push"):
    assert rows[w]["rpcie_with_ack"] >= rows[w]["rpcie"], rows[w]
PY
pass "rpcie-bench --device -o json: the five device rows, data path sealed, AEAD figures"
