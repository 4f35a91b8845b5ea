"""Helpers of metrics.sh: read a Prometheus text exposition, a status answer's histograms,
and a Prometheus server's query API.

  metrics_check.py value FILE NAME [LABEL=VALUE...]   the one sample of NAME whose labels
                                                     include those given (exit 1 unless one)
  metrics_check.py status FILE DEVICE                 checks DEVICE's latency histograms in a
                                                     `rpcie status -o json` answer; prints
                                                     mmio_reads and latency.mmio_read.count
  metrics_check.py query URL PROMQL                   the value of the query's one sample
                                                     ("none" when it has none yet)
"""
import json
import re
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


def status(path, device):
    a = {x["device"]: x for x in json.load(open(path))["attachments"]}[device]
    lat = a["latency"]
    for op in ("mmio_read", "config_read", "config_write", "flush", "bar_read", "bar_write"):
        h = lat[op]
        assert len(h["le_seconds"]) == 22 and h["le_seconds"][0] == 1e-06 and h["le_seconds"][-1] == 10, h
        assert len(h["counts"]) == 23 and sum(h["counts"]) == h["count"], (op, h)
        assert h["sum_seconds"] >= 0 and (h["count"] == 0) == (h["sum_seconds"] == 0), (op, h)
    print(a["counters"]["mmio_reads"], lat["mmio_read"]["count"])


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
    else:
        sys.exit("unknown command " + cmd)
