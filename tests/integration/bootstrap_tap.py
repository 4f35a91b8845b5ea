#!/usr/bin/env python3
"""An on-path observer of rpcie's bootstrap connection (docs/security.md 4.1).

  bootstrap_tap.py relay LISTEN_IP LISTEN_PORT TARGET_IP TARGET_PORT OUTDIR
      relays every TCP connection to TARGET and records each direction's bytes in
      OUTDIR/N.c2s and OUTDIR/N.s2c; prints "listening" once it accepts. Runs until killed.
  bootstrap_tap.py frames FILE
      prints the type number of every frame in FILE (docs/protocol.md 3: a u32 LE size, then
      a 24-byte header, the payload, and a 32-byte MAC when flag 1 is set), one per line;
      exit 1 if the bytes do not split into whole frames.
"""
import os
import socket
import struct
import sys
import threading

HEADER = struct.Struct("<IBBHIIQ")  # magic, version, type, flags, payload_length, reserved, request_id
MAGIC, FLAG_MAC, MAC_BYTES = 0x49435052, 1, 32


def pump(src, dst, path):
    with open(path, "wb") as out:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            out.write(data)
            out.flush()
            try:
                dst.sendall(data)
            except OSError:
                break
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(listen_ip, listen_port, target_ip, target_port, outdir):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((listen_ip, int(listen_port)))
    server.listen(16)
    print("listening", flush=True)
    n = 0
    while True:
        client, _ = server.accept()
        upstream = socket.create_connection((target_ip, int(target_port)), timeout=10)
        upstream.settimeout(None)
        base = os.path.join(outdir, str(n))
        n += 1
        for src, dst, suffix in ((client, upstream, ".c2s"), (upstream, client, ".s2c")):
            threading.Thread(target=pump, args=(src, dst, base + suffix), daemon=True).start()


def frames(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if len(data) - at < 4 + HEADER.size:
            sys.exit("bootstrap_tap: %s: %d bytes left, not a frame" % (path, len(data) - at))
        (size,) = struct.unpack_from("<I", data, at)
        magic, _, mtype, flags, length, _, _ = HEADER.unpack_from(data, at + 4)
        if magic != MAGIC:
            sys.exit("bootstrap_tap: %s: bad magic at %d" % (path, at))
        if size != HEADER.size + length + (MAC_BYTES if flags & FLAG_MAC else 0):
            sys.exit("bootstrap_tap: %s: frame at %d: size %d does not match its header" % (path, at, size))
        at += 4 + size
        print(mtype)
    if at != len(data):
        sys.exit("bootstrap_tap: %s: a frame runs past the end" % path)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "relay":
        relay(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "frames":
        frames(sys.argv[2])
    else:
        sys.exit(__doc__)
