#!/usr/bin/env python3
"""Measures `nodewarden sim --serve`: RSS and CPU of the server process over
a window, a full paged list of every pod, and how far a lease watch lags.

usage: measure-serve.py PID URL [--window SECS] [--watch SECS]
Standard library only; talks to the server on loopback.
"""
import json, os, sys, time, urllib.request

def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick

def rss(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS", "VmHWM")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) / 1024
    return out

def paged_list(url, path, limit=500):
    t0, n, pages, token = time.time(), 0, 0, None
    while True:
        q = f"{url}{path}?limit={limit}" + (f"&continue={token}" if token else "")
        with urllib.request.urlopen(q, timeout=60) as r:
            doc = json.load(r)
        n += len(doc["items"]); pages += 1
        token = doc["metadata"].get("continue")
        if not token:
            return n, pages, time.time() - t0

def watch_lag(url, secs):
    """Counts lease events for `secs` and how old each renewTime is on arrival."""
    lst = json.load(urllib.request.urlopen(f"{url}/apis/coordination.k8s.io/v1/leases?limit=1", timeout=30))
    rv = lst["metadata"]["resourceVersion"]
    r = urllib.request.urlopen(f"{url}/apis/coordination.k8s.io/v1/leases?watch=1&resourceVersion={rv}&timeoutSeconds={secs}", timeout=secs + 30)
    events, lags = 0, []
    for line in r:
        ev = json.loads(line)
        renew = ev["object"].get("spec", {}).get("renewTime")
        if renew:
            from datetime import datetime, timezone
            t = datetime.strptime(renew, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()
            lags.append(time.time() - t)
        events += 1
    lags.sort()
    pct = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))] if lags else float("nan")
    return events / secs, pct(0.5), pct(0.99), (lags[-1] if lags else float("nan"))

def main():
    pid, url = int(sys.argv[1]), sys.argv[2].rstrip("/")
    window = int(sys.argv[sys.argv.index("--window") + 1]) if "--window" in sys.argv else 30
    wsecs = int(sys.argv[sys.argv.index("--watch") + 1]) if "--watch" in sys.argv else 20
    c0, t0 = cpu_seconds(pid), time.time()
    time.sleep(window)
    c1, t1 = cpu_seconds(pid), time.time()
    print(f"idle-ish window {window}s: CPU {100 * (c1 - c0) / (t1 - t0):.1f}% of one core, RSS {rss(pid)}")
    n, pages, took = paged_list(url, "/api/v1/pods")
    print(f"paged list of all pods: {n} pods in {pages} pages of 500 in {took:.2f}s")
    n, pages, took = paged_list(url, "/api/v1/nodes")
    print(f"paged list of all nodes: {n} nodes in {pages} pages in {took:.2f}s")
    rate, p50, p99, worst = watch_lag(url, wsecs)
    print(f"lease watch over {wsecs}s: {rate:.0f} events/s, renewTime-to-arrival lag p50 {p50*1000:.0f}ms p99 {p99*1000:.0f}ms max {worst*1000:.0f}ms")
    print(f"RSS after: {rss(pid)}")

main()
