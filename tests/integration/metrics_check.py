"""Helpers of metrics.sh: read a Prometheus text exposition, a status answer's histograms,
and a Prometheus server's query API.

  metrics_check.py value FILE NAME [LABEL=VALUE...]   the one sample of NAME whose labels
                                                     include those given (exit 1 unless one)
  metrics_check.py status FILE DEVICE                 checks DEVICE's latency histograms in a
                                                     `rpcie status -o json` answer; prints
                                                     mmio_reads and latency.mmio_read.count
  metrics_check.py query URL PROMQL                   the value of the query's one sample
                                                     ("none" when it has none yet)
  metrics_check.py edu DEVDIR ROUNDS FACTORIALS       drives an edu device through hostd's
                                                     files: ROUNDS DMA round trips (window ->
                                                     device, device -> window, 4 KiB each,
                                                     an interrupt each) and FACTORIALS
                                                     factorials with an interrupt, each
                                                     interrupt awaited by a blocking read of
                                                     events; checks the data and the counts
"""
import json
import mmap
import os
import re
import struct
import sys
import urllib.parse
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(path):
    out = []
    for line in open(path):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            sys.exit("unparsable sample line: %r" % line)
        labels = dict(LABEL.findall(m.group(3) or ""))
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def value(path, name, wanted):
    want = dict(w.split("=", 1) for w in wanted)
    hits = [v for n, l, v in samples(path) if n == name and all(l.get(k) == x for k, x in want.items())]
    if len(hits) != 1:
        sys.exit("%d samples of %s %s in %s" % (len(hits), name, want, path))
    v = hits[0]
    print(int(v) if v == int(v) else v)


def histograms_check(lat, ops):
    for op in ops:
        h = lat[op]
        assert len(h["le_seconds"]) == 22 and h["le_seconds"][0] == 1e-06 and h["le_seconds"][-1] == 10, h
        assert len(h["counts"]) == 23 and sum(h["counts"]) == h["count"], (op, h)
        assert h["sum_seconds"] >= 0 and (h["count"] == 0) == (h["sum_seconds"] == 0), (op, h)


# Prints hostd's mmio_reads, mmio_read count, interrupts, interrupt_delivery count, then what
# the exporter reported (device_telemetry): dma_read, dma_write, window_pull and interrupt
# counts, and the DMA bytes read.
def status(path, device):
    a = {x["device"]: x for x in json.load(open(path))["attachments"]}[device]
    lat = a["latency"]
    histograms_check(lat, ("mmio_read", "config_read", "config_write", "flush", "bar_read", "bar_write",
                           "interrupt_delivery"))
    t = a["device_telemetry"]
    assert "error" not in t, t
    histograms_check(t["latency"], ("dma_read", "dma_write", "window_pull", "interrupt"))
    tl = t["latency"]
    print(a["counters"]["mmio_reads"], lat["mmio_read"]["count"], a["counters"]["interrupts"],
          lat["interrupt_delivery"]["count"], tl["dma_read"]["count"], tl["dma_write"]["count"],
          tl["window_pull"]["count"], tl["interrupt"]["count"], t["dma_read_bytes"])


# edu's registers (core/include/rpcie/edu_registers.hpp).
EDU_FACTORIAL, EDU_STATUS, EDU_IRQ_STATUS, EDU_IRQ_ACK = 0x08, 0x20, 0x24, 0x64
EDU_DMA_SRC, EDU_DMA_DST, EDU_DMA_COUNT, EDU_DMA_CMD = 0x80, 0x88, 0x90, 0x98
EDU_BUFFER, EDU_IRQ_ON_FACTORIAL = 0x40000, 0x80
EDU_DMA_START, EDU_DMA_TO_HOST, EDU_DMA_IRQ = 0x1, 0x2, 0x4


def edu(devdir, rounds, factorials):
    bar = os.open(os.path.join(devdir, "resource0"), os.O_RDWR)
    events = os.open(os.path.join(devdir, "events"), os.O_RDWR)
    wfd = os.open(os.path.join(devdir, "dma"), os.O_RDWR)
    window = mmap.mmap(wfd, 8192)

    def w32(off, v):
        assert os.pwrite(bar, struct.pack("<I", v), off) == 4

    def w64(off, v):
        assert os.pwrite(bar, struct.pack("<Q", v), off) == 8

    def r32(off):
        return struct.unpack("<I", os.pread(bar, 4, off))[0]

    # Unmasked (a mask left by an earlier user holds the count); the count so far.
    assert os.write(events, struct.pack("<I", 1)) == 4
    seen = None

    def interrupt_wait(bit):
        nonlocal seen
        count = struct.unpack("<I", os.read(events, 4))[0]  # blocks until the count moves
        assert seen is None or count == seen + 1, (seen, count)
        seen = count
        assert r32(EDU_IRQ_STATUS) & bit, hex(r32(EDU_IRQ_STATUS))
        w32(EDU_IRQ_ACK, bit)

    for i in range(rounds):
        data = os.urandom(4096)
        window[0:4096] = data
        w64(EDU_DMA_SRC, 0)  # window -> device buffer: the exporter's DMA read
        w64(EDU_DMA_DST, EDU_BUFFER)
        w64(EDU_DMA_COUNT, 4096)
        w64(EDU_DMA_CMD, EDU_DMA_START | EDU_DMA_IRQ)
        interrupt_wait(0x100)
        w64(EDU_DMA_SRC, EDU_BUFFER)  # device buffer -> window + 4 KiB: the DMA write
        w64(EDU_DMA_DST, 4096)
        w64(EDU_DMA_COUNT, 4096)
        w64(EDU_DMA_CMD, EDU_DMA_START | EDU_DMA_TO_HOST | EDU_DMA_IRQ)
        interrupt_wait(0x100)
        assert window[4096:8192] == data, "round %d: the DMA round trip changed the data" % i
    for n in range(factorials):
        w32(EDU_STATUS, EDU_IRQ_ON_FACTORIAL)
        w32(EDU_FACTORIAL, 5 + n)
        interrupt_wait(0x1)
        want = 1
        for k in range(2, 6 + n):
            want *= k
        assert r32(EDU_FACTORIAL) == want & 0xffffffff, (n, r32(EDU_FACTORIAL))
    w32(EDU_STATUS, 0)
    print(2 * rounds + factorials)


def query(url, promql):
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url + "/api/v1/query?" + q, timeout=5) as r:
        doc = json.load(r)
    result = doc["data"]["result"]
    if doc["status"] != "success" or not result:
        print("none")
        return
    if len(result) != 1:
        sys.exit("query %s: %d samples" % (promql, len(result)))
    v = float(result[0]["value"][1])
    print(int(v) if v == int(v) else v)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "value":
        value(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "status":
        status(sys.argv[2], sys.argv[3])
    elif cmd == "query":
        query(sys.argv[2], sys.argv[3])
    elif cmd == "edu":
        edu(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit("unknown command " + cmd)
