#!/usr/bin/env bash
# The served cluster frozen under one `nodewarden run`: `nodewarden sim
# --serve` (API server and kubelets, one process) is stopped with SIGSTOP
# for FREEZE seconds while every node is healthy, then continued; AFTER
# seconds later the verdict is taken from the server's journal (every
# stored change to a node or pod) and from kubectl:
#   - no node was ever written Ready=Unknown (its kubelet froze with the
#     API server: from the controller's side no heartbeat was missed that
#     the API server could have shown);
#   - no pod was deleted;
#   - no Ready node carries a `not-ready` or `unreachable` taint.
# Exits 1 when one does not hold. The fleet is generated (NODES nodes in
# three zones, 10 pods each), run keeps its defaults (grace 50 s).
#
#   scripts/freeze-trial.sh BINARY OUTDIR [FREEZE=100] [AFTER=240] [NODES=300]
set -u
BIN=$1; OUT=$2; FREEZE=${3:-100}; AFTER=${4:-240}; NODES=${5:-300}
PORT=${PORT:-19098}
mkdir -p "$OUT"; rm -f "$OUT/kc" "$OUT/journal.jsonl"
RUST_LOG=warn "$BIN" sim --serve 127.0.0.1:0 --quiet --write-kubeconfig "$OUT/kc" \
    --nodes "$NODES" --zones 3 --pods-per-node 10 --journal "$OUT/journal.jsonl" \
    > "$OUT/server.out" 2> "$OUT/server.log" &
SPID=$!
trap 'kill -CONT $SPID 2>/dev/null; kill $SPID ${RPID:-} 2>/dev/null' EXIT
for _ in $(seq 1 600); do [ -s "$OUT/kc" ] && break; sleep 0.2; done
[ -s "$OUT/kc" ] || { echo "the server did not serve; see $OUT/server.log" >&2; exit 1; }
RUST_LOG=info "$BIN" run --kubeconfig "$OUT/kc" --bind-address "127.0.0.1:$PORT" --leader-elect=false \
    --log-format json > "$OUT/run.out" 2> "$OUT/run.log" &
RPID=$!
for _ in $(seq 1 300); do grep -q "every cache synced" "$OUT/run.log" && break; sleep 0.2; done
grep -q "every cache synced" "$OUT/run.log" || { echo "run did not sync; see $OUT/run.log" >&2; exit 1; }
# A few monitor periods of steady state first.
sleep 30
echo "freeze-trial: SIGSTOP the served cluster for ${FREEZE} s" >&2
kill -STOP $SPID; sleep "$FREEZE"; kill -CONT $SPID
echo "freeze-trial: continued; the verdict in ${AFTER} s" >&2
sleep "$AFTER"
kubectl --kubeconfig "$OUT/kc" get nodes -o json > "$OUT/nodes.json"
kill $RPID 2>/dev/null; wait $RPID 2>/dev/null
python3 - "$OUT/journal.jsonl" "$OUT/nodes.json" "$OUT/run.log" <<'PY'
import json, sys
journal, nodes, log = sys.argv[1:4]
unknown, deleted, node_changes = set(), set(), 0
for line in open(journal):
    e = json.loads(line)
    if e.get("kind") == "Node" and not e.get("deleted"):
        node_changes += 1
        for c in e["object"].get("status", {}).get("conditions", []):
            if c.get("type") == "Ready" and c.get("status") == "Unknown":
                unknown.add(e["key"])
    if e.get("kind") == "Pod" and e.get("deleted"):
        deleted.add(e["key"])
tainted = []
for n in json.load(open(nodes))["items"]:
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
    keys = {t["key"] for t in n.get("spec", {}).get("taints", []) or []}
    if ready and keys & {"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"}:
        tainted.append(n["metadata"]["name"])
silent = sum('does not answer' in l for l in open(log))
print(json.dumps({"nodes": len(json.load(open(nodes))["items"]), "node_changes": node_changes, "nodes_written_unknown": sorted(unknown),
                  "pods_deleted": sorted(deleted), "ready_nodes_tainted": tainted,
                  "api_silences_logged": silent}))
ok = not unknown and not deleted and not tainted
print("freeze-trial:", "PASS" if ok else "FAIL", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
