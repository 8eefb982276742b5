#!/usr/bin/env python3
"""Writes a kubectl-style snapshot (a v1 List of Nodes, node Leases, Pods,
DaemonSets and PodDisruptionBudgets, as `kubectl get
nodes,pods,leases,daemonsets,poddisruptionbudgets -A -o json` prints it) of
a made-up cluster, for measuring `nodewarden sim --from-snapshot` at scale.

    scripts/gen-snapshot.py NODES PODS_PER_NODE [ZONES] > snapshot.json

Pods look like real ones (containers, resources, status, owner references,
the admission-added tolerations): about 2 KB each. Two per node are
DaemonSet pods; the rest belong to Deployments of 3 to 12 replicas spread
round-robin over the nodes (so some land in one zone only), one in ten to a
StatefulSet; every fifth workload has a PodDisruptionBudget.
"""
import json
import sys
from datetime import datetime, timedelta, timezone

nodes = int(sys.argv[1])
per_node = int(sys.argv[2])
zones = int(sys.argv[3]) if len(sys.argv) > 3 else 3
now = datetime(2026, 11, 23, 12, 0, 0, tzinfo=timezone.utc)
ts = lambda d: (now - timedelta(seconds=d)).strftime("%Y-%m-%dT%H:%M:%SZ")
micro = lambda d: (now - timedelta(seconds=d)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
out = sys.stdout
out.write('{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [\n')
first = True


def emit(obj):
    global first
    if not first:
        out.write(",\n")
    first = False
    out.write(json.dumps(obj, separators=(",", ":")))


def zone_of(i):
    return "zone-" + chr(ord("a") + i * zones // nodes)


for i in range(nodes):
    name = f"ip-10-{i >> 16 & 255}-{i >> 8 & 255}-{i & 255}.ec2.internal"
    emit({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "uid": f"n-{i:08x}", "creationTimestamp": ts(86400 * 30), "resourceVersion": str(i),
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                   "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone_of(i),
                   "node.kubernetes.io/instance-type": "m6i.2xlarge", "pool": "general" if i % 10 else "system"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
        "spec": {"providerID": f"aws:///{zone_of(i)}/i-{i:017x}"},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "allocatable": {"cpu": "7910m", "memory": "31Gi", "pods": "110"},
                   "conditions": [
                       {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                        "lastHeartbeatTime": ts(i % 300), "lastTransitionTime": ts(86400 * 30)},
                       {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": ts(i % 300), "lastTransitionTime": ts(86400 * 30)}],
                   "nodeInfo": {"kubeletVersion": "v1.32.4", "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://1.7.27"}}})
    emit({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {
        "name": name, "namespace": "kube-node-lease", "uid": f"l-{i:08x}", "creationTimestamp": ts(86400 * 30),
        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": f"n-{i:08x}"}]},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro((i * 7919 % 10000) / 1000.0)}})

defaults = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]


def pod(ns, name, node_i, owner_kind, owner, labels, tolerations, uid, priority=0, pclass=None):
    node = f"ip-10-{node_i >> 16 & 255}-{node_i >> 8 & 255}-{node_i & 255}.ec2.internal"
    spec = {"nodeName": node, "tolerations": tolerations, "priority": priority, "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": f"registry.example.com/{owner}:1.4.2", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                            "env": [{"name": "LOG_LEVEL", "value": "info"}],
                            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 10}}]}
    if pclass:
        spec["priorityClassName"] = pclass
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": ns, "uid": uid, "creationTimestamp": ts(86400), "labels": labels,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": f"o-{owner}", "controller": True, "blockOwnerDeletion": True}]},
        "spec": spec,
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1", "startTime": ts(86400), "qosClass": "Burstable",
                   "conditions": [{"type": t, "status": "True", "lastTransitionTime": ts(86400)} for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                   "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "started": True, "image": "x", "imageID": "x",
                                          "containerID": "containerd://0", "state": {"running": {"startedAt": ts(86400)}}}]}}


uid = 0
for ds in ("kube-proxy", "node-exporter")[:min(2, per_node)]:
    emit({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": ds, "namespace": "kube-system", "uid": f"o-{ds}"}, "spec": {}})
    for i in range(nodes):
        uid += 1
        emit(pod("kube-system", f"{ds}-{i:06x}", i, "DaemonSet", ds, {"app": ds}, [{"operator": "Exists"}], f"p-{uid:010x}", 2000001000, "system-node-critical"))

rest = nodes * max(0, per_node - 2)
placed = 0
w = 0
slot = 0
while placed < rest:
    replicas = min(3 + w % 10, rest - placed)
    ns = f"team-{w % 40:02d}"
    statefulset = w % 10 == 9
    name = f"svc-{w:05d}"
    h = f"{w * 2654435761 % 0xfffffff:07x}"
    labels = {"app": name}
    if not statefulset:
        labels["pod-template-hash"] = h
    if w % 5 == 0:
        emit({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
              "spec": {"minAvailable": max(1, replicas - 1), "selector": {"matchLabels": {"app": name}}}})
    # Replicas go to consecutive node slots, so small workloads often sit in one zone.
    stride = 1 if w % 3 else max(1, nodes // zones)
    for r in range(replicas):
        uid += 1
        node_i = (slot + r * stride) % nodes
        if statefulset:
            emit(pod(ns, f"{name}-{r}", node_i, "StatefulSet", name, labels, defaults, f"p-{uid:010x}"))
        else:
            emit(pod(ns, f"{name}-{h}-{uid:05x}", node_i, "ReplicaSet", f"{name}-{h}", labels, defaults, f"p-{uid:010x}"))
    slot = (slot + replicas) % nodes
    placed += replicas
    w += 1
out.write("\n]}\n")
