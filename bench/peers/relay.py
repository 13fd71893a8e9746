"""A TCP relay on loopback: counts the bytes each way and can hold every segment for a fixed time.

Counting gives real on-the-wire bytes per request for every protocol (HTTP/2, websocket, ZMTP and
Zenoh framing included). The hold adds one-way delay where the kernel has no netem.
"""

from __future__ import annotations

import collections
import socket
import threading
import time


class Relay:
    def __init__(
        self, target: tuple[str, int], delay_s: float = 0.0, listen_host: str = "127.0.0.1", listen_port: int = 0
    ) -> None:
        self.target, self.delay_s = target, delay_s
        self.up = 0  # client -> server bytes
        self.down = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self.paused = threading.Event()  # set: nothing crosses (a partition); data waits in the kernel buffers
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((listen_host, listen_port))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self._lock:
            self.up = self.down = 0

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.target, timeout=5)
                s.settimeout(None)
            except OSError:
                c.close()
                continue
            for sk in (c, s):
                sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._socks += [c, s]
            self._pump(c, s, "up")
            self._pump(s, c, "down")

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        held: collections.deque[tuple[float, bytes]] = collections.deque()
        cv = threading.Condition()
        done = threading.Event()

        def reader() -> None:
            while True:
                try:
                    data = src.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    done.set()
                    if self.delay_s <= 0:
                        try:
                            dst.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                    with cv:
                        cv.notify()
                    return
                while self.paused.is_set():
                    time.sleep(0.002)
                with self._lock:
                    setattr(self, way, getattr(self, way) + len(data))
                if self.delay_s <= 0:
                    try:
                        dst.sendall(data)
                    except OSError:
                        return
                    continue
                with cv:
                    held.append((time.monotonic() + self.delay_s, data))
                    cv.notify()

        def sender() -> None:
            while True:
                with cv:
                    while not held and not done.is_set():
                        cv.wait(0.5)
                    if not held and done.is_set():
                        break
                    due, data = held[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                with cv:
                    held.popleft()
                try:
                    dst.sendall(data)
                except OSError:
                    return
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        threading.Thread(target=reader, daemon=True).start()
        if self.delay_s > 0:
            threading.Thread(target=sender, daemon=True).start()

    def partition(self, seconds: float) -> None:
        """Hold everything for `seconds`, then let it through (TCP retransmits across a real partition)."""
        self.paused.set()
        time.sleep(seconds)
        self.paused.clear()

    def cut(self) -> None:
        """Drop every open connection (the listener stays): a partition seen from TCP."""
        for sk in self._socks:
            try:
                sk.shutdown(socket.SHUT_RDWR)
                sk.close()
            except OSError:
                pass
        self._socks.clear()

    def stop(self) -> None:
        self._stop.set()
        self.lsock.close()
        self.cut()


def main() -> None:
    """`python -m bench.peers.relay --target HOST:PORT --delay-ms D [--listen HOST:PORT]`: a delay relay process."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--target", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="one-way hold per segment, each direction")
    args = ap.parse_args()
    host, port = args.target.rsplit(":", 1)
    lhost, lport = args.listen.rsplit(":", 1)
    relay = Relay((host, int(port)), args.delay_ms / 1000, listen_host=lhost, listen_port=int(lport))
    print(f"RELAY READY {relay.port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
