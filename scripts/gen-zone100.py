#!/usr/bin/env python3
"""Writes the 100-node zone outage scenario of docs/run.md ("A zone outage,
with the queue as data"): three zones of 100 nodes with 10 pods each,
30 s default tolerations, zone-a's kubelets stopped from 10 s to 200 s.

    scripts/gen-zone100.py > zone100.yaml
"""
zones = ["a", "b", "c"]
out = [
    "name: 100-node zone outage, 30 s tolerations",
    "cluster: {default-not-ready-toleration-seconds: 30, default-unreachable-toleration-seconds: 30}",
    "config: {node-eviction-rate: 1}",
    "nodes:",
]
for z in zones:
    for i in range(100):
        out.append(f"- {{name: {z}-{i:03d}, zone: region1/zone-{z}, created: -1h, ready: 'True', "
                   f"heartbeat: 0s, transition: -1h, lease: 0s, kubelet: true}}")
out.append("pods:")
for z in zones:
    for i in range(100):
        for p in range(10):
            out.append(f"- {{name: default/{z}-{i:03d}-p{p}, node: {z}-{i:03d}, ready: true}}")
down = ", ".join(f"a-{i:03d}" for i in range(100))
out += ["events:", f"- {{at: 10s, kubelet-stop: [{down}]}}", f"- {{at: 200s, kubelet-start: [{down}]}}", "run-until: 260s"]
print("\n".join(out))
