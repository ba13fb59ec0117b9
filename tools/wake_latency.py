#!/usr/bin/env python3
"""Wake-up latency of a blocking exchange on this box, with 0, 1 or 2 busy processes beside it.

A diagnostic for the local pipeline benches, which run 4 ranks on 2 cores: one process computes
2 ms, then sends a byte to a partner process and waits for its reply (a pipe). With both cores
busy, a reply sometimes waits a scheduler slice for a core. Prints the round trip's mean, median
and 90th percentile in ms per load. Not a RESULT; see benchmarks/results/planner-local-chronicle.md
(thirty-fifth session).
  python3 tools/wake_latency.py
"""
import multiprocessing as mp
import time


def busy(stop):
    """A hog: one core's worth of work until told to stop."""
    x = 0
    while not stop.is_set():
        for _ in range(100000):
            x += 1


def pong(conn, n):
    for _ in range(n):
        conn.send_bytes(conn.recv_bytes())


def work(ms):
    t = time.perf_counter()
    while time.perf_counter() - t < ms / 1000:
        pass


def run(nbusy, n=300, work_ms=2.0):
    """Mean, median and 90th percentile round trip (ms) with nbusy hogs running."""
    stop = mp.Event()
    hogs = [mp.Process(target=busy, args=(stop,)) for _ in range(nbusy)]
    for h in hogs:
        h.start()
    a, b = mp.Pipe()
    partner = mp.Process(target=pong, args=(b, n))
    partner.start()
    time.sleep(0.5)
    rt = []
    for _ in range(n):
        work(work_ms)  # this rank computes, then waits for its partner's reply
        t = time.perf_counter()
        a.send_bytes(b"x")
        a.recv_bytes()
        rt.append(time.perf_counter() - t)
    partner.join()
    stop.set()
    for h in hogs:
        h.join()
    rt.sort()
    return sum(rt) / n * 1e3, rt[n // 2] * 1e3, rt[int(n * 0.9)] * 1e3


if __name__ == "__main__":
    for nbusy in (0, 1, 2):
        print("busy", nbusy, "round trip ms mean/median/p90 = %.3f %.3f %.3f" % run(nbusy))
