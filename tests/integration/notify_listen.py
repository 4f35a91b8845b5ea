#!/usr/bin/env python3
"""A service manager's notify socket, for tests/integration/service_notify.sh.

    notify_listen.py SOCKET EVENTS READY_CHECK

Binds an AF_UNIX datagram socket at SOCKET and appends one line to EVENTS per datagram:
"<CLOCK_MONOTONIC seconds> <its KEY=VALUE lines joined by ' | '>". On each READY=1 it runs
READY_CHECK (a shell command) at once, before reading the next datagram, and appends
"<time> ready-check rc=N": whether the daemon really served when it said it was ready.
Runs until killed.
"""
import os
import socket
import subprocess
import sys
import time


def main():
    path, events, check = sys.argv[1], sys.argv[2], sys.argv[3]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    with open(events, "a", buffering=1) as out:
        while True:
            data = s.recv(4096).decode("utf-8", "replace")
            now = time.monotonic()
            fields = [f for f in data.split("\n") if f]
            out.write("%.3f %s\n" % (now, " | ".join(fields)))
            if "READY=1" in fields:
                rc = subprocess.call(["sh", "-c", check], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                out.write("%.3f ready-check rc=%d\n" % (time.monotonic(), rc))


if __name__ == "__main__":
    main()
