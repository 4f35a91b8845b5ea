#!/usr/bin/env python3
"""A capture of a veth and the memory keys in it (issue 12 point 7; docs/security.md 5.2).

  rma_capture.py capture IFACE STOPFILE OUTFILE MAX_SECONDS
      Records every frame of IFACE (both directions; an AF_PACKET socket, so run it inside
      the interface's namespace) until STOPFILE exists or MAX_SECONDS pass, then writes them
      to OUTFILE (each frame: a 4-byte little-endian length, then the bytes). Prints
      "capturing" once the socket is bound and "captured N frames B bytes" at the end.
  rma_capture.py keys CAPFILE REGION_SIZE MAX [OPSFILE]
      Reassembles each TCP flow of the capture (IPv4) and prints up to MAX distinct
      candidate keys as "KEY ADDR" lines (hex), from two scans:
       - framed: the RMA operations of libfabric 1.17's tcp provider, a 16-byte header
         (u8 version 3, u8 op: 2 read request, 4 write, 5 write async; u16 flags; u8
         op_data; u8 rma_iov_cnt 1..4; u8 hdr_size; u8 id; u64 size) whose last
         rma_iov_cnt * 24 bytes of hdr_size are struct ofi_rma_iov { u64 addr; u64 len;
         u64 key; }, little-endian (seen in this test's own capture of the open path);
       - loose: every place, aligned or not, where 24 bytes read as an ofi_rma_iov with
         addr < REGION_SIZE, 0 < len <= 16 MiB and key != 0 (whatever the framing).
      Framed keys come first, then loose keys of 2^32 and above (the shape of a random
      63-bit key), then by how often they were seen. On stderr:
      "flows N bytes B rma-headers H framed-keys F loose-keys L". OPSFILE, if given, gets
      one line per framed RMA operation: "OP ADDR LEN KEY" (OP read or write; hex numbers).
"""
import collections
import os
import re
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
MAX_BYTES = 256 << 20  # what a capture keeps at most


def capture(iface, stopfile, outfile, max_seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        s.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
    except OSError:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
    s.bind((iface, 0))
    s.settimeout(0.1)
    print("capturing", flush=True)
    frames, total = [], 0
    until = time.monotonic() + max_seconds
    while time.monotonic() < until and not os.path.exists(stopfile):
        try:
            frame = s.recv(1 << 18)
        except socket.timeout:
            continue
        if total + len(frame) > MAX_BYTES:
            break
        frames.append(frame)
        total += len(frame)
    # Drain what arrived before the stop.
    s.setblocking(False)
    while total < MAX_BYTES:
        try:
            frame = s.recv(1 << 18)
        except OSError:
            break
        frames.append(frame)
        total += len(frame)
    with open(outfile, "wb") as f:
        for frame in frames:
            f.write(struct.pack("<I", len(frame)) + frame)
    print("captured %d frames %d bytes" % (len(frames), total), flush=True)


def frames_read(path):
    data = open(path, "rb").read()
    i = 0
    while i + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, i)
        yield data[i + 4:i + 4 + n]
        i += 4 + n


def flows_of(path):
    """{(src, sport, dst, dport): payload bytes in sequence order}."""
    segments = collections.defaultdict(dict)
    for f in frames_read(path):
        if len(f) < 14 + 20 or struct.unpack_from(">H", f, 12)[0] != 0x0800:
            continue
        ip = f[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[0] >> 4 != 4 or ip[9] != 6 or len(ip) < ihl + 20:
            continue
        total = struct.unpack_from(">H", ip, 2)[0] or len(ip)  # 0 with TSO: the frame's length
        tcp = ip[ihl:min(total, len(ip))]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            key = (socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport)
            segments[key].setdefault(seq, payload)
    flows = {}
    for key, segs in segments.items():
        base = min(segs)
        out, end = bytearray(), None
        for seq in sorted(segs, key=lambda s: (s - base) & 0xFFFFFFFF):
            rel, p = (seq - base) & 0xFFFFFFFF, segs[seq]
            if end is not None and rel < end:  # a retransmission or overlap
                p = p[end - rel:]
            out += p
            end = rel + len(segs[seq]) if end is None else max(end, rel + len(segs[seq]))
        flows[key] = bytes(out)
    return flows


# addr and len below 2^24: their top five bytes are zero. A regex finds those places fast.
TRIPLE = re.compile(rb"(?=(...\x00\x00\x00\x00\x00...\x00\x00\x00\x00\x00........))", re.DOTALL)


# The tcp provider's base header of an RMA operation (version 3; read request, write, write
# async; op_data 0; 1..4 rma_iov).
RMA_HEADER = re.compile(rb"\x03[\x02\x04\x05]..\x00[\x01-\x04]", re.DOTALL)


def keys(capfile, region_size, cap, opsfile=None):
    flows = flows_of(capfile)
    seen = collections.Counter()
    first_addr = {}
    framed, headers, ops = [], 0, []
    for payload in flows.values():
        for m in RMA_HEADER.finditer(payload):
            at = m.start()
            count, size = payload[at + 5], payload[at + 6]
            iov = at + size - 24 * count
            if not (16 + 24 * count <= size <= 24 + 24 * count) or iov + 24 * count > len(payload):
                continue
            headers += 1
            for i in range(count):
                addr, length, key = struct.unpack_from("<QQQ", payload, iov + 24 * i)
                ops.append("%s %#x %#x %#x" % ("read" if payload[at + 1] == 2 else "write", addr, length, key))
                if key not in first_addr:
                    framed.append(key)
                    first_addr[key] = addr
    for payload in flows.values():
        for m in TRIPLE.finditer(payload):
            addr, length, key = struct.unpack("<QQQ", m.group(1))
            if addr < region_size and 0 < length <= (16 << 20) and key != 0:
                seen[key] += 1
                first_addr.setdefault(key, addr)
    if opsfile:
        with open(opsfile, "w") as f:
            f.writelines(op + "\n" for op in ops)
    loose = [k for k in seen if k not in framed]
    print("flows %d bytes %d rma-headers %d framed-keys %d loose-keys %d" %
          (len(flows), sum(len(p) for p in flows.values()), headers, len(framed), len(loose)), file=sys.stderr)
    ranked = framed + sorted(loose, key=lambda k: (k < (1 << 32), -seen[k], k))
    for k in ranked[:cap]:
        print("%#x %#x" % (k, first_addr[k]))


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "capture":
        capture(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "keys":
        keys(sys.argv[2], int(sys.argv[3], 0), int(sys.argv[4]), sys.argv[5] if len(sys.argv) == 6 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
