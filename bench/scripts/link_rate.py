#!/usr/bin/env python3
"""One TCP stream's rate between two hosts (bench/scripts/network.sh runs it in their namespaces).

  link_rate.py receive PORT            accepts one connection, counts what arrives until the sender
                                       closes, prints {"bytes": ..., "seconds": ..., "bytes_per_s": ...}
  link_rate.py send HOST PORT SECONDS  sends 1 MiB buffers for SECONDS, then closes

The receiver's count over the time from the first byte to the last is the figure: what the link
carried, not what the sender queued.
"""
import json
import socket
import sys
import time


def receive(port):
    with socket.create_server(("", port)) as server:
        server.settimeout(30)
        connection, _ = server.accept()
        with connection:
            buffer = bytearray(1 << 20)
            total, first, last = 0, None, None
            while True:
                count = connection.recv_into(buffer)
                if count == 0:
                    break
                last = time.perf_counter()
                first = first or last
                total += count
    seconds = (last - first) if first is not None else 0.0
    print(json.dumps({"bytes": total, "seconds": round(seconds, 6),
                      "bytes_per_s": round(total / seconds, 1) if seconds > 0 else 0.0}))


def send(host, port, seconds):
    payload = bytes(1 << 20)
    for attempt in range(50):  # the receiver may still be starting
        try:
            connection = socket.create_connection((host, port), timeout=10)
            break
        except OSError:
            if attempt == 49:
                raise
            time.sleep(0.1)
    with connection:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            connection.sendall(payload)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "receive":
        receive(int(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
