#!/usr/bin/env python3
"""A man in the middle of rpcie's bootstrap and fabric connections that replays messages
(docs/security.md 5.3). Run by datapath_replay.sh; see the topology there.

  fabric_relay.py CMP_NETNS_SIDE DEV_NETNS_SIDE DEV_IP CMP_IP EXPORTD_PID HOSTD_PID DIR SECONDS

CMP_NETNS_SIDE is the namespace (a /run/netns path) that faces the compute side and owns
DEV_IP; DEV_NETNS_SIDE faces the device side and owns CMP_IP. The relay listens in the first
on DEV_IP at every port the exporter listens on (read from /proc/EXPORTD_PID/net/tcp), and in
the second on CMP_IP at every port of hostd's namespace (/proc/HOSTD_PID/net/tcp); each
connection it accepts it makes again from the other namespace, so each daemon sees the
other's genuine address. Listeners are mirrored before any bootstrap byte is passed on: a
fabric address travels in the (sealed) hello, and the endpoint behind it listens by then.

Bytes are forwarded as they are. A fabric connection (any but the bootstrap port) is split
into libfabric 1.17 tcp messages: first one connection-management message each way (a
32-byte ofi_ctrl_hdr whose big-endian u16 at offset 2 is the length of the data after it),
then messages that each start with a 16-byte base header (version 3, op, flags, op_data,
rma_iov_cnt, hdr_size, id, then a little-endian u64 size: the whole message, header
included). The relay stops with an error if a stream does not split so.

DIR/messages gets one line per fabric message, in order:
  DIRECTION INDEX CONN SIZE OP FLAGS HDR_SIZE RXM_TYPE SEQUENCE
DIRECTION is c2d (hostd to exporter) or d2c; INDEX counts from 0 per direction; OP, FLAGS and
HDR_SIZE are the base header's (op 0 a message, 2 an RMA read request, 3 its response, 4 an
RMA write); for a message, RXM_TYPE is the ofi_rxm packet's ofi_ctrl_hdr type (0: eager) and
SEQUENCE the u64 at the start of the rpcie message after rxm's 64-byte header (a sealed
message's sequence, in clear); "-" otherwise (one-sided RMA, and op 0 messages of the bare
16-byte header: tcp's acknowledgements of delivery-complete writes).

Commands: the test writes DIR/cmd.N (N = 1, 2, ...: "DIRECTION INDEX"), and the relay sends
a copy of that already-forwarded message again on its connection, in the same direction, at
the next message boundary, then writes DIR/done.N ("replayed DIRECTION INDEX conn C size S
sequence Q" or "refused: WHY"). Exits after SECONDS.
"""
import collections
import ctypes
import os
import select
import socket
import struct
import sys
import time

CTRL_HDR = 32  # struct ofi_ctrl_hdr
BASE_HDR = struct.Struct("<BBHBBBBQ")  # struct xnet_base_hdr (16 bytes)
RXM_HDR = 64  # struct rxm_pkt: ofi_ctrl_hdr + ofi_op_hdr
XNET_VERSION = 3
XNET_OP_MSG = 0  # then 1 tagged, 2 read request, 3 read response, 4 write
CLONE_NEWNET = 0x40000000
LIBC = ctypes.CDLL(None, use_errno=True)
BOOT_PORT = 7385  # rpcie-exportd's bootstrap port (the default); every other port is fabric
HISTORY = 2048  # messages kept per direction
OUT_HIGH = 8 << 20  # stop reading a side while more than this waits for the other


class Relay:
    def __init__(self, cmp_side, dev_side, dev_ip, cmp_ip, exportd_pid, hostd_pid, outdir):
        # "cmp" and "dev": the relay's namespaces facing the compute and the device side.
        self.ns = {"cmp": os.open(cmp_side, os.O_RDONLY), "dev": os.open(dev_side, os.O_RDONLY)}
        self.home = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.dev_ip, self.cmp_ip = dev_ip, cmp_ip
        self.pids = {"cmp": exportd_pid, "dev": hostd_pid}  # whose listeners each side mirrors
        self.outdir = outdir
        self.listeners = {}  # (side, port) -> socket
        self.streams = []
        self.conns = 0
        self.history = {"c2d": collections.OrderedDict(), "d2c": collections.OrderedDict()}
        self.count = {"c2d": 0, "d2c": 0}
        self.log = open(os.path.join(outdir, "messages"), "w")
        self.next_cmd = 1

    def socket_in(self, side):
        """A TCP socket in that side's namespace (a socket keeps the one it was made in)."""
        setns(self.ns[side])
        try:
            return socket.socket()
        finally:
            setns(self.home)

    @staticmethod
    def tcp_listen_ports(pid, ip):
        want = {"00000000", socket.inet_aton(ip)[::-1].hex().upper()}
        ports = set()
        with open("/proc/%s/net/tcp" % pid) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                addr, port = fields[1].split(":")
                if fields[3] == "0A" and addr in want:
                    ports.add(int(port, 16))
        return ports

    def mirror(self):
        for side, ip in (("cmp", self.dev_ip), ("dev", self.cmp_ip)):
            for port in self.tcp_listen_ports(self.pids[side], ip):
                if (side, port) in self.listeners:
                    continue
                s = self.socket_in(side)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((ip, port))
                s.listen(16)
                s.setblocking(False)
                self.listeners[(side, port)] = s
                print("mirroring %s:%d on the %s side" % (ip, port, side), flush=True)

    def accept(self, side, port, lsock):
        client, _ = lsock.accept()
        other = "dev" if side == "cmp" else "cmp"
        upstream = self.socket_in(other)
        upstream.settimeout(5)
        upstream.connect((self.dev_ip if side == "cmp" else self.cmp_ip, port))
        for s in (client, upstream):
            s.setblocking(False)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = self.conns
        self.conns += 1
        fabric = port != BOOT_PORT
        # A connection accepted on the compute side was opened by hostd.
        there, back = ("c2d", "d2c") if side == "cmp" else ("d2c", "c2d")
        a = Stream(self, conn, client, upstream, there, fabric)
        b = Stream(self, conn, upstream, client, back, fabric)
        a.peer, b.peer = b, a
        self.streams += [a, b]
        print("conn %d: %s, opened by %s, port %d" % (conn, "fabric" if fabric else "bootstrap",
                                                      "hostd" if side == "cmp" else "the exporter", port), flush=True)

    def message(self, stream, data):
        d = stream.direction
        index = self.count[d]
        self.count[d] += 1
        _, op, flags, _, _, hdr_size, _, size = BASE_HDR.unpack_from(data)
        rxm_type = seq = "-"
        at = hdr_size + RXM_HDR
        if op == XNET_OP_MSG and len(data) >= at + 8:  # others are one-sided RMA: no rxm header
            rxm_type = data[hdr_size + 1]
            seq = struct.unpack_from("<Q", data, at)[0]
        self.log.write("%s %d %d %d %d %d %d %s %s\n" % (d, index, stream.conn, size, op, flags, hdr_size, rxm_type, seq))
        self.log.flush()
        h = self.history[d]
        h[index] = (stream, bytes(data), seq)
        while len(h) > HISTORY:
            h.popitem(last=False)

    def commands(self):
        path = os.path.join(self.outdir, "cmd.%d" % self.next_cmd)
        if not os.path.exists(path):
            return
        with open(path) as f:
            words = f.read().split()
        n = self.next_cmd
        self.next_cmd += 1
        done = os.path.join(self.outdir, "done.%d" % n)
        if len(words) != 2 or words[0] not in self.history:
            return result(done, "refused: bad command %r" % words)
        entry = self.history[words[0]].get(int(words[1]))
        if entry is None:
            return result(done, "refused: no %s message %s in the history" % tuple(words))
        stream, data, seq = entry
        if stream.closed:
            return result(done, "refused: its connection is closed")
        stream.replays.append((data, "replayed %s %s conn %d size %d sequence %s" % (words[0], words[1], stream.conn,
                                                                                   len(data), seq), done))
        stream.replay_at_boundary()

    def run(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.mirror()
            self.commands()
            rd = [s for s in self.listeners.values()]
            rd += [st.src for st in self.streams if not st.closed and len(st.out) < OUT_HIGH]
            wr = [st.dst for st in self.streams if not st.closed and st.out]
            r, w, _ = select.select(rd, wr, [], 0.05)
            for (side, port), ls in list(self.listeners.items()):
                if ls in r:
                    self.accept(side, port, ls)
            for st in list(self.streams):
                if st.closed:
                    continue
                if st.dst in w:
                    st.flush()
                if st.src in r:
                    st.pump()
            self.streams = [st for st in self.streams if not st.closed]


def setns(fd):
    # os.setns is Python 3.12's; this relay runs on 3.11 too.
    if LIBC.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


def result(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text + "\n")
    os.rename(path + ".tmp", path)
    print(text, flush=True)


class Stream:
    """One direction of one relayed connection."""

    def __init__(self, relay, conn, src, dst, direction, fabric):
        self.relay, self.conn, self.src, self.dst = relay, conn, src, dst
        self.direction, self.fabric = direction, fabric
        self.peer = None
        self.out = bytearray()  # for dst
        self.closed = False
        self.cm_done = not fabric
        self.cur = bytearray()  # the message being read
        self.replays = []

    def pump(self):
        try:
            data = self.src.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        if not self.fabric:
            self.relay.mirror()  # before a hello, or hello_ack, can name an endpoint
            self.out += data
        else:
            self.split(data)
        self.flush()

    def split(self, data):
        at = 0
        while at < len(data):
            need = self.need()
            take = min(need - len(self.cur), len(data) - at)
            self.cur += data[at:at + take]
            self.out += data[at:at + take]
            at += take
            if len(self.cur) == self.need():
                self.complete()

    def need(self):
        """The bytes of the current message known so far to be needed."""
        if not self.cm_done:
            if len(self.cur) < CTRL_HDR:
                return CTRL_HDR
            return CTRL_HDR + struct.unpack_from(">H", self.cur, 2)[0]
        if len(self.cur) < BASE_HDR.size:
            return BASE_HDR.size
        version, _, _, _, _, hdr_size, _, size = BASE_HDR.unpack_from(self.cur)
        if version != XNET_VERSION or size < hdr_size or hdr_size < BASE_HDR.size:
            sys.exit("fabric_relay: conn %d %s: not a tcp message header: %s" %
                     (self.conn, self.direction, bytes(self.cur[:16]).hex()))
        return size

    def complete(self):
        if not self.cm_done:
            if len(self.cur) < CTRL_HDR:
                return
            if len(self.cur) == self.need():
                print("conn %d %s: connection message: version %d type %d, %d bytes of data" %
                      (self.conn, self.direction, self.cur[0], self.cur[1], len(self.cur) - CTRL_HDR), flush=True)
                self.cm_done = True
                self.cur = bytearray()
            return
        if len(self.cur) < BASE_HDR.size or len(self.cur) < self.need():
            return
        self.relay.message(self, self.cur)
        self.cur = bytearray()
        self.replay_at_boundary()

    def replay_at_boundary(self):
        if not self.cm_done or self.cur or not self.replays:
            return
        for data, text, done in self.replays:
            self.out += data
            result(done, text)
        self.replays = []
        self.flush()

    def flush(self):
        if not self.out:
            return
        try:
            n = self.dst.send(self.out)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        del self.out[:n]

    def close(self):
        if self.closed:
            return
        self.closed = True
        for s in (self.src, self.dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self.peer:
            self.peer.close()
        for _, _, done in self.replays:
            result(done, "refused: its connection closed first")


if __name__ == "__main__":
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    r = Relay(*sys.argv[1:8])
    r.mirror()
    print("listening", flush=True)
    r.run(float(sys.argv[8]))
