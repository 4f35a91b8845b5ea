#!/usr/bin/env python3
"""Keyless and hostile peers of rpcie-exportd, for exportd_security.sh (loopback only).

  idle HOST PORT SRC                 one connection from SRC that sends nothing; prints the
                                     seconds until the exporter closed it
  burst HOST PORT SRC N              N connections from SRC at once; prints one line per
                                     connection: seconds from connect to EOF, and the error
                                     text the exporter sent (if any); every wait bounded
  flood HOST PORT PREFIX ADDRS PER -- CMD...
                                     PER idle connections from each of ADDRS addresses
                                     PREFIX.1 .. PREFIX.ADDRS; while they are open runs CMD
                                     and prints "cmd rc=RC seconds=S", then how many of the
                                     connections the exporter closed before 0.9 s
                                     ("early=E") and the slowest close ("last=S")
  inject HOST PORT NAME              auth_hello with NAME (may hold a newline), a wrong
                                     proof; prints the exporter's error text
  badmac HOST PORT PSK NAME N        authenticates, sends N frames with a bad MAC, then a
                                     real list_request; prints "listed K exports"
"""
import os
import resource
import select
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import auth_client as ac  # noqa: E402

BOUND = 3.0  # no wait below is longer than this per connection


def connect_from(host, port, src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(5)
    s.connect((host, port))
    s.setblocking(False)
    return s


def drain(s):
    """Reads what is there; returns (eof, bytes)."""
    data = b""
    while True:
        try:
            chunk = s.recv(4096)
        except BlockingIOError:
            return False, data
        except ConnectionResetError:
            return True, data
        if not chunk:
            return True, data
        data += chunk


def error_text(data):
    if len(data) < 4 + 24 + 6:
        return ""
    mtype = data[4 + 5]
    if mtype != ac.T_ERROR:
        return "type %d" % mtype
    code, tlen = struct.unpack_from("<iH", data, 4 + 24)
    return data[4 + 30:4 + 30 + tlen].decode(errors="replace")


def watch(socks, started, until):
    """Waits for EOF on every socket (bounded by `until`); returns {sock: (seconds, data)}."""
    done, data = {}, {s: b"" for s in socks}
    while len(done) < len(socks) and time.monotonic() < until:
        pending = [s for s in socks if s not in done]
        r, _, _ = select.select(pending[:1000], [], [], 0.05)
        now = time.monotonic()
        for s in r:
            eof, d = drain(s)
            data[s] += d
            if eof:
                done[s] = (now - started[s], data[s])
    return done


def cmd_idle(host, port, src):
    s = connect_from(host, port, src)
    t0 = time.monotonic()
    got = watch([s], {s: t0}, t0 + 5)
    print("%.3f" % got[s][0] if s in got else "open")


def cmd_burst(host, port, src, n):
    socks, started, done, data = [], {}, {}, {}
    for _ in range(n):
        s = connect_from(host, port, src)
        started[s] = time.monotonic()
        socks.append(s)
        data[s] = b""
        # Notice closes as they happen, not after the whole burst.
        for r in select.select(socks, [], [], 0)[0]:
            if r in done:
                continue
            eof, d = drain(r)
            data[r] += d
            if eof:
                done[r] = (time.monotonic() - started[r], data[r])
    rest = watch([s for s in socks if s not in done], started, time.monotonic() + BOUND)
    for s in socks:
        if s in rest:
            done[s] = (rest[s][0], data[s] + rest[s][1])
    for s in socks:
        t, d = done.get(s, (None, data[s]))
        print("%s %s" % ("open" if t is None else "%.3f" % t, error_text(d)))


def cmd_flood(host, port, prefix, addrs, per, cmd):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, addrs * per + 256)), hard))
    socks, started = [], {}
    for a in range(1, addrs + 1):
        for _ in range(per):
            s = connect_from(host, port, "%s.%d" % (prefix, a))
            started[s] = time.monotonic()
            socks.append(s)
    t0 = time.monotonic()
    rc = subprocess.call(cmd, stdout=subprocess.DEVNULL)
    print("cmd rc=%d seconds=%.3f" % (rc, time.monotonic() - t0))
    got = watch(socks, started, time.monotonic() + BOUND)
    early = sum(1 for s in socks if s in got and got[s][0] < 0.9)
    print("connections=%d closed=%d early=%d last=%.3f" % (
        len(socks), len(got), early, max((v[0] for v in got.values()), default=0)))


def cmd_inject(host, port, name):
    conn = ac.Conn(host, port, 5)
    nc = os.urandom(32)
    conn.send(ac.T_AUTH_HELLO, bytes([len(name)]) + name + nc)
    conn.recv()  # the challenge (decoy)
    conn.send(ac.T_AUTH_PROOF, b"\0" * 32)
    try:
        conn.recv()
        print("accepted?!")
    except ac.Refused as e:
        print(e)


def cmd_badmac(host, port, psk, name, n):
    with open(psk) as f:
        key = ac.key_parse(f.read())
    conn = ac.Conn(host, port, 5)
    ac.authenticate(conn, key, name)
    msg = ac.encode(ac.T_LIST_REQUEST, b"", 7, ac.FLAG_MAC)
    bad = msg + b"\x55" * 32
    frames = struct.pack("<I", len(bad)) + bad
    conn.sock.sendall(frames * n)
    conn.send(ac.T_LIST_REQUEST, b"", 1)
    mtype, rid, payload = conn.recv()
    print("listed %d exports" % len(ac.list_reply_names(payload)))
    conn.send(ac.T_GOODBYE, b"", 2)
    conn.close()


def main():
    a = sys.argv[1:]
    host, port = a[1], int(a[2])
    if a[0] == "idle":
        cmd_idle(host, port, a[3])
    elif a[0] == "burst":
        cmd_burst(host, port, a[3], int(a[4]))
    elif a[0] == "flood":
        cmd_flood(host, port, a[3], int(a[4]), int(a[5]), a[a.index("--") + 1:])
    elif a[0] == "inject":
        cmd_inject(host, port, a[3].encode())
    elif a[0] == "badmac":
        cmd_badmac(host, port, a[3], a[4].encode(), int(a[5]))
    else:
        sys.exit("unknown command " + a[0])


if __name__ == "__main__":
    main()
