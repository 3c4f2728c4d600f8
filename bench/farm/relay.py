#!/usr/bin/env python3
"""BENCH SCAFFOLDING: a TCP relay that makes a network link of a given round-trip time and
bandwidth between dtlto-bridge and the farm's server (bench/farm.sh). This machine's kernel has
no netem, so the link is made in user space.

It listens on a loopback TCP port and forwards every connection to the server (a Unix socket or
HOST:PORT). Each direction is one link shared by all connections, as one network path is: a
chunk read from one side leaves when the link has sent what came before it (its bytes at the
bandwidth, `--mbit`), and arrives half the round-trip time (`--rtt-ms`) later. A direction holds
at most `--buffer` bytes in flight; beyond that it stops reading, so the sender's TCP and
HTTP/2 flow control feel the link as they would a real one.

`--late-ms` holds every byte the server sends that much longer (on top of half the round trip):
an engine that leaves Nagle on answers each call's trailers only once the client's delayed ACK
comes, some 40 ms later, so calls one after another each wait that long, while calls in flight
side by side overlap their waits. Holding the server's answers models both.

`--log` appends a line of JSON per connection once it closes: its gRPC calls (HTTP/2 streams the
client opened), how many of them it started while none was in flight (each is one wait on the
link at least: a lower bound of the round trips on the client's critical path), and its bytes
each way. The relay reads only the frames' 9-byte headers, never their payloads.

Threads, not asyncio: asyncio's event loop rounds its timeouts up to whole milliseconds, which
would turn a 1 ms round trip into 2 ms or more. `--selftest` measures what the relay really
gives (round trip of one byte, throughput of a bulk transfer) against an echo server.
"""

import argparse
import collections
import json
import os
import socket
import statistics
import sys
import threading
import time

CHUNK = 64 * 1024


class Link:
    """One direction of the path: its bandwidth and one-way delay, shared by all connections."""

    def __init__(self, mbit, delay):
        self.rate = mbit * 1e6 / 8  # bytes per second; 0 = unlimited
        self.delay = delay
        self.free = 0.0  # when the link has sent everything handed to it
        self.lock = threading.Lock()

    def arrival(self, size):
        """When a chunk of `size` bytes handed to the link now reaches the other end."""
        with self.lock:
            now = time.monotonic()
            start = max(now, self.free)
            self.free = start + (size / self.rate if self.rate else 0.0)
            return self.free + self.delay


class Frames:
    """The HTTP/2 frame headers of one direction of a connection, read as its bytes pass:
    `on_frame(type, flags, stream)` for each; the client's connection preface is skipped."""

    PREFACE = len(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

    def __init__(self, client, on_frame):
        self.skip = self.PREFACE if client else 0
        self.head = b""
        self.on_frame = on_frame

    def feed(self, data):
        i, n = 0, len(data)
        while i < n:
            if self.skip:
                k = min(self.skip, n - i)
                self.skip -= k
                i += k
                continue
            take = min(9 - len(self.head), n - i)
            self.head += data[i:i + take]
            i += take
            if len(self.head) == 9:
                h, self.head = self.head, b""
                self.skip = int.from_bytes(h[:3], "big")
                self.on_frame(h[3], h[4], int.from_bytes(h[5:9], "big") & 0x7FFFFFFF)


class Calls:
    """The gRPC calls of one connection: opened by the client's HEADERS on a new stream, over
    once the server ends the stream (END_STREAM) or either side resets it."""

    HEADERS, RST_STREAM, END_STREAM = 1, 3, 1

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = self.serial = self.last = 0
        self.open = set()
        self.bytes = {"up": 0, "down": 0}

    def client_frame(self, ftype, flags, stream):
        with self.lock:
            if ftype == self.HEADERS and stream > self.last:
                self.last = stream
                self.calls += 1
                self.serial += not self.open
                self.open.add(stream)
            elif ftype == self.RST_STREAM:
                self.open.discard(stream)

    def server_frame(self, ftype, flags, stream):
        with self.lock:
            if ftype == self.RST_STREAM or (ftype in (0, self.HEADERS) and flags & self.END_STREAM):
                self.open.discard(stream)


class Pipe:
    """One direction of one connection: a reader thread that stamps each chunk with its arrival
    time, and a writer thread that delivers it then."""

    def __init__(self, src, dst, link, buffer, on_close, frames=None, count=None):
        self.src, self.dst, self.link, self.buffer = src, dst, link, buffer
        self.frames, self.count = frames, count
        self.queue = collections.deque()
        self.queued = 0
        self.cond = threading.Condition()
        self.on_close = on_close
        threading.Thread(target=self.read, daemon=True).start()
        threading.Thread(target=self.write, daemon=True).start()

    def read(self):
        try:
            while True:
                with self.cond:
                    while self.queued >= self.buffer:
                        self.cond.wait()
                data = self.src.recv(CHUNK)
                if self.frames is not None:
                    self.frames.feed(data)
                if self.count is not None:
                    self.count(len(data))
                at = self.link.arrival(len(data)) if data else time.monotonic() + self.link.delay
                with self.cond:
                    self.queue.append((at, data))
                    self.queued += len(data)
                    self.cond.notify_all()
                if not data:
                    return
        except OSError:
            with self.cond:
                self.queue.append((0.0, b""))
                self.cond.notify_all()

    def write(self):
        try:
            while True:
                with self.cond:
                    while not self.queue:
                        self.cond.wait()
                    at, data = self.queue.popleft()
                wait = at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    try:
                        self.dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    break
                self.dst.sendall(data)
                with self.cond:
                    self.queued -= len(data)
                    self.cond.notify_all()
        except OSError:
            pass
        self.on_close()


def connect(target):
    if target.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(target[5:])
        return s
    host, port = target.rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Relay:
    def __init__(self, target, rtt_ms, mbit, buffer, listen=("127.0.0.1", 0), late_ms=0.0,
                 log=None):
        self.target = target
        self.up = Link(mbit, rtt_ms / 2000)  # client to server
        self.down = Link(mbit, rtt_ms / 2000 + late_ms / 1000)  # server to client
        self.buffer = buffer
        self.log = log
        self.log_lock = threading.Lock()
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(listen)
        self.server.listen(128)
        self.port = self.server.getsockname()[1]
        self.connections = 0

    def serve_forever(self):
        while True:
            client, _ = self.server.accept()
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                upstream = connect(self.target)
            except OSError:
                client.close()
                continue
            self.connections += 1
            closed = []
            calls = Calls() if self.log else None

            def on_close(client=client, upstream=upstream, closed=closed, calls=calls):
                closed.append(1)
                if len(closed) == 2:
                    client.close()
                    upstream.close()
                    if calls is not None:
                        self.write_log(calls)

            if calls is None:
                Pipe(client, upstream, self.up, self.buffer, on_close)
                Pipe(upstream, client, self.down, self.buffer, on_close)
                continue

            def count(direction, calls=calls):
                def add(n):
                    with calls.lock:
                        calls.bytes[direction] += n
                return add

            Pipe(client, upstream, self.up, self.buffer, on_close,
                 Frames(True, calls.client_frame), count("up"))
            Pipe(upstream, client, self.down, self.buffer, on_close,
                 Frames(False, calls.server_frame), count("down"))

    def write_log(self, calls):
        line = json.dumps({"calls": calls.calls, "serial": calls.serial,
                           "up": calls.bytes["up"], "down": calls.bytes["down"],
                           "closed": time.time()})
        with self.log_lock, open(self.log, "a") as f:
            f.write(line + "\n")


def selftest(rtt_ms, mbit, buffer, late_ms=0.0):
    """Round trip of one byte (median of 50) and the throughput of a 16 MB transfer through a
    relay to an echo server on a Unix socket; printed as one JSON line."""
    import tempfile
    d = tempfile.mkdtemp(prefix="dtlto-relay-")
    path = os.path.join(d, "echo.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def echo():
        while True:
            c, _ = srv.accept()

            def one(c=c):
                while True:
                    head = c.recv(9)
                    if not head:
                        return
                    while len(head) < 9:
                        head += c.recv(9 - len(head))
                    n = int.from_bytes(head[1:], "big")
                    got = 0
                    while got < n:
                        got += len(c.recv(min(CHUNK, n - got)))
                    c.sendall(b"k")
            threading.Thread(target=one, daemon=True).start()
    threading.Thread(target=echo, daemon=True).start()
    relay = Relay("unix:" + path, rtt_ms, mbit, buffer, late_ms=late_ms)
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    c = socket.create_connection(("127.0.0.1", relay.port))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def exchange(n):
        start = time.perf_counter()
        c.sendall(b"x" + n.to_bytes(8, "big") + b"y" * n)
        assert c.recv(1) == b"k"
        return time.perf_counter() - start
    exchange(0)
    rtts = [exchange(0) for _ in range(50)]
    rtt = statistics.median(rtts)
    size = 16 << 20
    bulk = min(exchange(size) for _ in range(2))
    os.remove(path)
    os.rmdir(d)
    print(json.dumps({"rtt_ms": rtt * 1000, "mbit": size * 8 / max(bulk - rtt, 1e-9) / 1e6,
                      "bulk_seconds": bulk}))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--to", help="the server: unix:PATH or HOST:PORT")
    p.add_argument("--rtt-ms", type=float, required=True)
    p.add_argument("--mbit", type=float, required=True, help="bandwidth each way; 0 = unlimited")
    p.add_argument("--buffer", type=int, default=4 << 20, help="bytes in flight each way")
    p.add_argument("--port-file", help="write the chosen port here once listening")
    p.add_argument("--late-ms", type=float, default=0.0,
                   help="hold every byte the server sends this much longer")
    p.add_argument("--log", help="append a line of JSON per connection once it closes")
    p.add_argument("--selftest", action="store_true")
    args = p.parse_args()
    if args.selftest:
        selftest(args.rtt_ms, args.mbit, args.buffer, args.late_ms)
        return
    relay = Relay(args.to, args.rtt_ms, args.mbit, args.buffer, late_ms=args.late_ms,
                  log=args.log)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(relay.port))
        os.rename(tmp, args.port_file)
    relay.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
