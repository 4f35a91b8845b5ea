#!/usr/bin/env python3
"""A service manager's notify socket, for tests/integration/service_notify.sh.

    notify_listen.py SOCKET EVENTS READY_CHECK [AFTER_CHECK]

Binds an AF_UNIX datagram socket at SOCKET and appends one line to EVENTS per datagram:
"<CLOCK_MONOTONIC seconds> <its KEY=VALUE lines joined by ' | '>". On each READY=1 it stops
the sender (SIGSTOP, its pid from SCM_CREDENTIALS) and waits until every thread of it has
stopped, so that the daemon is frozen at the moment it said it was ready; runs READY_CHECK
(a shell command) then, lets the daemon go on (SIGCONT), runs AFTER_CHECK if given (one that
needs the daemon to answer), and appends "<time> ready-check rc=N" (the first nonzero rc).
Runs until killed.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time


def threads_stopped(pid, deadline):
    """Until every thread of pid is stopped (state T or t), or the deadline."""
    while time.monotonic() < deadline:
        states = []
        try:
            for t in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            return False
        if all(s in ("T", "t") for s in states):
            return True
        time.sleep(0.001)
    return False


def sh(command):
    return subprocess.call(["sh", "-c", command], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def ready_check(pid, check, after):
    os.kill(pid, signal.SIGSTOP)
    try:
        if not threads_stopped(pid, time.monotonic() + 5):
            return 100
        rc = sh(check)
    finally:
        os.kill(pid, signal.SIGCONT)
    return rc if rc != 0 or not after else sh(after)


def main():
    path, events, check = sys.argv[1], sys.argv[2], sys.argv[3]
    after = sys.argv[4] if len(sys.argv) > 4 else ""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    s.bind(path)
    creds_size = struct.calcsize("3i")
    with open(events, "a", buffering=1) as out:
        while True:
            data, ancillary, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(creds_size))
            now = time.monotonic()
            pid = 0
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("3i", value[:creds_size])[0]
            fields = [f for f in data.decode("utf-8", "replace").split("\n") if f]
            out.write("%.3f %s\n" % (now, " | ".join(fields)))
            if "READY=1" in fields:
                rc = ready_check(pid, check, after) if pid > 0 else 101
                out.write("%.3f ready-check rc=%d\n" % (time.monotonic(), rc))


if __name__ == "__main__":
    main()
