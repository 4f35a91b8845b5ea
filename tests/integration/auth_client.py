#!/usr/bin/env python3
"""A second implementation of rpcie's bootstrap client, written from docs/protocol.md
(sections 3, 4.6-4.11, 6.1, 7.1, 7.2, 11) and docs/auth.md (sections 1.1, 2-6) alone, with
the Python standard library only. It authenticates to a real rpcie-exportd, lists the
exports and prints their names, one per line.

  auth_client.py HOST PORT --psk-file FILE [--name NAME]
      exit 0 and the export names; exit 1 and "auth_client: ..." on stderr when the
      exporter is refused (its proof does not verify) or refuses us.
  auth_client.py HOST PORT --psk-file FILE --name NAME --bench N --unknown OTHER
      the name-timing figure: median microseconds from sending auth_hello to receiving
      auth_challenge, over N handshakes each for NAME and for OTHER (interleaved).
"""
import argparse
import hashlib
import hmac
import os
import socket
import statistics
import struct
import sys
import time

MAGIC = 0x49435052  # "RPCI"
VERSION = 1
HEADER = struct.Struct("<IBBHIIQ")  # magic, version, type, flags, payload_length, reserved, request_id
FLAG_MAC = 1
T_ERROR, T_GOODBYE = 3, 7
T_AUTH_HELLO, T_AUTH_CHALLENGE, T_AUTH_PROOF, T_AUTH_OK = 8, 9, 10, 11
T_LIST_REQUEST, T_LIST_REPLY = 12, 13
T_RESUME_REQUEST = 38
DOMAIN = b"rpcie-auth-v1"


class Refused(Exception):
    pass


def key_parse(text):
    """auth.md 1.1: hex, whitespace anywhere, every digit on one line, 32..128 bytes."""
    lines = [l for l in text.split("\n") if l.strip(" \t\r\v\f")]
    if len(lines) != 1:
        raise ValueError("a key file holds its hex digits on one line")
    digits = "".join(lines[0].split())
    key = bytes.fromhex(digits)
    if not 32 <= len(key) <= 128:
        raise ValueError("a key is 32 to 128 bytes")
    return key


def hmac_fields(key, *fields):
    """auth.md 4: every field as u32 LE length + bytes, HMAC-SHA256."""
    data = b"".join(struct.pack("<I", len(f)) + f for f in fields)
    return hmac.new(key, data, hashlib.sha256).digest()


def proof(key, role, name, nc, ns):
    return hmac_fields(key, DOMAIN, b"proof", role, name, nc, ns)


def session_key(key, name, nc, ns):
    return hmac_fields(key, DOMAIN, b"session-key", name, nc, ns)


def frame_mac(s_key, role, seq, message):
    return hmac_fields(s_key, DOMAIN, b"frame", role, struct.pack("<Q", seq), message)


def encode(mtype, payload, request_id=0, flags=0):
    return HEADER.pack(MAGIC, VERSION, mtype, flags, len(payload), 0, request_id) + payload


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise Refused("the exporter closed the connection")
        out += chunk
    return out


class Conn:
    def __init__(self, host, port, timeout):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s_key = None  # the session key, once authenticated
        self.send_seq = 0
        self.recv_seq = 0

    def send(self, mtype, payload=b"", request_id=0):
        if self.s_key is None:
            body = encode(mtype, payload, request_id)
        else:  # protocol.md 11.1: flag set, MAC over the message, our sequence
            msg = encode(mtype, payload, request_id, FLAG_MAC)
            body = msg + frame_mac(self.s_key, b"client", self.send_seq, msg)
            self.send_seq += 1
        self.sock.sendall(struct.pack("<I", len(body)) + body)

    def recv(self):
        """One frame -> (type, request_id, payload); frames with a bad MAC are skipped (6.1)."""
        while True:
            (length,) = struct.unpack("<I", recv_exact(self.sock, 4))
            if length < 24 or length > 65592:
                raise Refused("frame length %d out of range" % length)
            body = recv_exact(self.sock, length)
            if self.s_key is not None:
                msg, mac = body[:-32], body[-32:]
                if not hmac.compare_digest(mac, frame_mac(self.s_key, b"server", self.recv_seq, msg)):
                    continue  # dropped; the expected sequence stays
                self.recv_seq += 1
            else:
                msg = body
            magic, version, mtype, flags, plen, reserved, rid = HEADER.unpack_from(msg)
            if magic != MAGIC or version != VERSION or reserved != 0 or plen != len(msg) - 24:
                raise Refused("malformed message")
            if bool(flags & FLAG_MAC) != (self.s_key is not None):
                raise Refused("MAC flag does not match the connection's state")
            payload = msg[24:]
            if mtype == T_ERROR:
                code, tlen = struct.unpack_from("<iH", payload)
                raise Refused("exporter error %d: %s" % (code, payload[6:6 + tlen].decode(errors="replace")))
            return mtype, rid, payload

    def close(self):
        self.sock.close()


def authenticate(conn, key, name):
    """protocol.md 7.1 / auth.md 2: hello, challenge, verify, proof, auth_ok."""
    nc = os.urandom(32)
    conn.send(T_AUTH_HELLO, bytes([len(name)]) + name + nc)
    mtype, _, payload = conn.recv()
    if mtype != T_AUTH_CHALLENGE or len(payload) != 64:
        raise Refused("expected auth_challenge, got type %d" % mtype)
    ns, server_proof = payload[:32], payload[32:]
    if not hmac.compare_digest(server_proof, proof(key, b"server", name, nc, ns)):
        raise Refused("authentication failed: the exporter did not prove the key")
    conn.send(T_AUTH_PROOF, proof(key, b"client", name, nc, ns))
    mtype, _, payload = conn.recv()
    if mtype != T_AUTH_OK or payload:
        raise Refused("expected auth_ok, got type %d" % mtype)
    conn.s_key = session_key(key, name, nc, ns)  # every later frame carries a MAC, from sequence 0


def list_reply_names(payload):
    """protocol.md 4.11: count, then entries of 21 + N + B + H + 11 K bytes."""
    (count,) = struct.unpack_from("<H", payload)
    at, names = 2, []
    for _ in range(count):
        n = payload[at]
        name = payload[at + 1:at + 1 + n].decode()
        at += 1 + n
        b = payload[at]
        backend = payload[at + 1:at + 1 + b].decode()
        at += 1 + b
        h = payload[at]
        at += 1 + h
        at += 2 + 2 + 4 + 2 + 2 + 1  # vendor, device, class_code, subsystem ids, revision
        state = payload[at]
        at += 1 + 1 + 2  # state, flags, vectors
        k = payload[at]
        at += 1 + 11 * k
        names.append((name, backend, "attached" if state else "free"))
    if at != len(payload):
        raise Refused("list_reply has %d bytes left over" % (len(payload) - at))
    return names


def do_list(host, port, key, name, timeout):
    conn = Conn(host, port, timeout)
    try:
        authenticate(conn, key, name)
        conn.send(T_LIST_REQUEST, b"", 1)
        mtype, rid, payload = conn.recv()
        if mtype != T_LIST_REPLY or rid != 1:
            raise Refused("expected list_reply with request_id 1")
        exports = list_reply_names(payload)
        conn.send(T_GOODBYE, b"", 2)
        return exports
    finally:
        conn.close()


def do_resume(host, port, key, name, attachment_id, timeout):
    """protocol.md 4.29: resume_request {attachment_id, answered 0} for an attachment the
    exporter does not keep (none of this client's links was lost): error ENOENT. The
    connection stays usable: a list follows on it."""
    conn = Conn(host, port, timeout)
    try:
        authenticate(conn, key, name)
        conn.send(T_RESUME_REQUEST, struct.pack("<QQ", attachment_id, 0), 1)
        try:
            mtype, rid, _ = conn.recv()
            raise Refused("resume_request answered with type %d, not an error" % mtype)
        except Refused as e:
            answer = str(e)
        conn.send(T_LIST_REQUEST, b"", 2)
        mtype, rid, payload = conn.recv()
        if mtype != T_LIST_REPLY or rid != 2:
            raise Refused("expected list_reply with request_id 2 after the resume_request")
        conn.send(T_GOODBYE, b"", 3)
        return answer, len(list_reply_names(payload))
    finally:
        conn.close()


def challenge_time(host, port, name, timeout):
    """Microseconds from auth_hello sent to auth_challenge received, or None if refused."""
    conn = Conn(host, port, timeout)
    try:
        hello = encode(T_AUTH_HELLO, bytes([len(name)]) + name + os.urandom(32))
        frame = struct.pack("<I", len(hello)) + hello
        t0 = time.perf_counter()
        conn.sock.sendall(frame)
        mtype, _, _ = conn.recv()
        t1 = time.perf_counter()
        return (t1 - t0) * 1e6 if mtype == T_AUTH_CHALLENGE else None
    except Refused:
        return None  # over the exporter's pre-authentication cap: try again
    finally:
        conn.close()


def bench(host, port, known, unknown, n, timeout):
    times = {known: [], unknown: []}
    tries = 0
    while min(len(v) for v in times.values()) < n and tries < 20 * n:
        for who in (known, unknown):
            tries += 1
            if len(times[who]) >= n:
                continue
            t = challenge_time(host, port, who, timeout)
            if t is None:
                time.sleep(0.01)
            else:
                times[who].append(t)
    for who in (known, unknown):
        v = times[who]
        print("%-10s n=%d median %.1f us  (p10 %.1f, p90 %.1f)" % (
            who.decode(), len(v), statistics.median(v), statistics.quantiles(v, n=10)[0],
            statistics.quantiles(v, n=10)[-1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("port", type=int)
    ap.add_argument("--psk-file", required=True)
    ap.add_argument("--name", default=socket.gethostname())
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--bench", type=int, default=0)
    ap.add_argument("--unknown", default="nobody-here")
    ap.add_argument("--resume", type=int, help="ask to resume this attachment id, then list")
    a = ap.parse_args()
    name = a.name.encode()
    try:
        if a.bench:
            bench(a.host, a.port, name, a.unknown.encode(), a.bench, a.timeout)
            return 0
        with open(a.psk_file) as f:
            key = key_parse(f.read())
        if a.resume is not None:
            answer, exports = do_resume(a.host, a.port, key, name, a.resume, a.timeout)
            print("resume: %s; then %d exports listed" % (answer, exports))
            return 0
        for export, backend, state in do_list(a.host, a.port, key, name, a.timeout):
            print(export, backend, state)
        return 0
    except (Refused, OSError, ValueError) as e:
        print("auth_client: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
