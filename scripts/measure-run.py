#!/usr/bin/env python3
"""Measures `nodewarden run` against `nodewarden sim --serve` on loopback:
time from start to every cache synced, the run process's memory once synced
(adapter caches + engine + interlock), and the end-to-end latencies of one
node crash (last Lease renewal -> Ready=Unknown written -> NoExecute taint).

usage: measure-run.py [--nodes N] [--pods-per-node P] [--zones Z]
                      [--settle SECS] [--binary PATH] [--no-crash]

Runs the release binary (target/release/nodewarden unless --binary); build
it first with `cargo build --release -p nodewarden`. Prints one JSON object.
Standard library only; Linux only (/proc).
"""
import argparse, json, os, re, signal, subprocess, sys, tempfile, time, urllib.request
from datetime import datetime, timezone

def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None

def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)

def get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)

def ts(s):
    return datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z" if "." not in s else "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--pods-per-node", type=int, default=30)
    ap.add_argument("--zones", type=int, default=3)
    ap.add_argument("--settle", type=float, default=20.0, help="seconds after sync before memory is read")
    ap.add_argument("--binary", default="target/release/nodewarden")
    ap.add_argument("--no-crash", action="store_true", help="skip the crash latency part")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="nodewarden-measure-")
    kubeconfig = os.path.join(tmp, "kubeconfig")
    serve = subprocess.Popen(
        [a.binary, "sim", "--serve", "127.0.0.1:0", "--nodes", str(a.nodes), "--zones", str(a.zones),
         "--pods-per-node", str(a.pods_per_node), "--scenario", "node-crash", "--quiet",
         "--write-kubeconfig", kubeconfig],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    run = None
    try:
        serve.stdout.readline()  # "kubeconfig: PATH" once it serves
        served_at = time.time()
        url = re.search(r"server:\s*(\S+)", open(kubeconfig).read()).group(1)
        metrics_port = 20000 + os.getpid() % 20000
        log = open(os.path.join(tmp, "run.log"), "w")
        started = time.time()
        serve_cpu_before = cpu_seconds(serve.pid)
        run = subprocess.Popen(
            [a.binary, "run", "--kubeconfig", kubeconfig, "--leader-elect=false",
             "--bind-address", f"127.0.0.1:{metrics_port}"],
            stdout=subprocess.DEVNULL, stderr=log)
        synced = None
        while synced is None:
            if run.poll() is not None:
                sys.exit(f"nodewarden run exited: {open(log.name).read()[-2000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2)
                synced = time.time()
            except Exception:
                time.sleep(0.05)
        cpu_at_sync = {"run_cpu_seconds_to_synced": cpu_seconds(run.pid),
                       "serve_cpu_seconds_to_synced": round(cpu_seconds(serve.pid) - serve_cpu_before, 2)}
        time.sleep(a.settle)
        out = {
            "nodes": a.nodes,
            "pods": a.nodes * a.pods_per_node,
            "seconds_to_synced": round(synced - started, 2),
            **cpu_at_sync,
            "run_cpu_seconds_after_settle": cpu_seconds(run.pid),
            "run_rss_mib": round(status_kb(run.pid, "VmRSS") / 1024, 1),
            "run_peak_rss_mib": round(status_kb(run.pid, "VmHWM") / 1024, 1),
            "serve_rss_mib": round(status_kb(serve.pid, "VmRSS") / 1024, 1),
        }
        if not a.no_crash:
            # node-crash stops one node at 1m after the server started; the
            # default grace is 40s, so look for up to 3 minutes.
            deadline = served_at + 180
            unknown_at = tainted_at = None
            crashed = None
            while time.time() < deadline and tainted_at is None:
                nodes = get(f"{url}/api/v1/nodes?limit=100000", timeout=120)["items"]
                # Of the crashed nodes already tainted, the one marked
                # Unknown first (several crash at 10k nodes; the zone rate
                # taints them one by one).
                best = None
                for n in nodes:
                    ready = next((c for c in n.get("status", {}).get("conditions", []) if c["type"] == "Ready"), {})
                    if ready.get("status") != "Unknown":
                        continue
                    t = next((t for t in n.get("spec", {}).get("taints", []) if t["key"] == "node.kubernetes.io/unreachable" and t["effect"] == "NoExecute"), None)
                    if t:
                        cand = (ts(ready["lastTransitionTime"]), ts(t["timeAdded"]), n["metadata"]["name"])
                        best = min(best, cand) if best else cand
                if best:
                    unknown_at, tainted_at, crashed = best
                else:
                    time.sleep(1)
            if crashed and tainted_at:
                lease = get(f"{url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{crashed}")
                node = get(f"{url}/api/v1/nodes/{crashed}")
                ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
                # The last heartbeat of either kind: a status post after the
                # last Lease renewal also counts (upstream's probe time).
                last = max(ts(lease["spec"]["renewTime"]), ts(ready["lastHeartbeatTime"]))
                out.update({
                    "crashed_node": crashed,
                    "detection_seconds": round(unknown_at - last, 2),
                    "taint_after_unknown_seconds": round(tainted_at - unknown_at, 2),
                    "note": "detection = Ready=Unknown lastTransitionTime - last heartbeat (Lease renewTime or Ready lastHeartbeatTime); expected grace 40s .. grace + monitor period 45s; condition and taint times are whole seconds",
                })
            else:
                out["crash"] = "not seen within 3 minutes"
        print(json.dumps(out, indent=2))
    finally:
        for p in (run, serve):
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()

if __name__ == "__main__":
    main()
