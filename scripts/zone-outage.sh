#!/usr/bin/env bash
# A zone outage over the wire, sampled: `nodewarden sim --serve` with the
# given arguments and one `nodewarden run --leader-elect=false`, both
# started here on loopback; every ~2 s, run's RSS, its write queue, the
# deletions the API accepted and the requests sent, written to
# OUTDIR/samples.tsv (seconds since run started, run RSS KiB, queue depth,
# deletions, requests, server RSS KiB). Prints run's peak RSS at the end.
# For a scenario file's zone outage (scripts/gen-zone100.py writes one);
# a generated fleet's is `cargo xtask wire-load --zone-outage`, which
# judges every deletion too.
#
#   scripts/zone-outage.sh BINARY SECONDS OUTDIR SERVE_ARGS... [-- RUN_ARGS...]
#   scripts/zone-outage.sh target/release/nodewarden 300 /tmp/z40k \
#       --scenario zone-outage --nodes 40000 --zones 3 --pods-per-node 25 --speed 6
#   scripts/zone-outage.sh target/release/nodewarden 250 /tmp/z100 \
#       --scenario zone100.yaml -- --node-eviction-rate 1
set -u
BIN=$1; SECS=$2; OUT=$3; shift 3
SERVE=(); RUN=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do SERVE+=("$1"); shift; done
[ $# -gt 0 ] && shift && RUN=("$@")
PORT=${PORT:-19099}
mkdir -p "$OUT"; rm -f "$OUT/kc"
RUST_LOG=warn "$BIN" sim --serve 127.0.0.1:0 --quiet --write-kubeconfig "$OUT/kc" "${SERVE[@]}" \
    > "$OUT/server.out" 2> "$OUT/server.log" &
SPID=$!
trap 'kill $SPID ${RPID:-} 2>/dev/null' EXIT
for _ in $(seq 1 1200); do [ -s "$OUT/kc" ] && break; sleep 0.2; done
[ -s "$OUT/kc" ] || { echo "the server did not serve; see $OUT/server.log" >&2; exit 1; }
START=$(date +%s.%N)
RUST_LOG=info "$BIN" run --kubeconfig "$OUT/kc" --bind-address "127.0.0.1:$PORT" --leader-elect=false \
    --log-format json "${RUN[@]}" > "$OUT/run.out" 2> "$OUT/run.log" &
RPID=$!
: > "$OUT/samples.tsv"
while :; do
  sleep 2
  T=$(awk -v s="$START" -v n="$(date +%s.%N)" 'BEGIN {printf "%.1f", n - s}')
  RSS=$(ps -o rss= -p $RPID 2>/dev/null | tr -d ' ')
  SRSS=$(ps -o rss= -p $SPID 2>/dev/null | tr -d ' ')
  M=$(curl -s "127.0.0.1:$PORT/metrics")
  Q=$(awk '/^nodewarden_write_queue_depth/ {s+=$2} END {print s+0}' <<< "$M")
  DEL=$(awk '/^taint_eviction_controller_pod_deletions_total/ {s+=$2} END {print s+0}' <<< "$M")
  REQ=$(awk '/^nodewarden_api_requests_total/ {s+=$2} END {print s+0}' <<< "$M")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$T" "${RSS:-gone}" "$Q" "$DEL" "$REQ" "$SRSS" >> "$OUT/samples.tsv"
  [ -z "$RSS" ] && { echo "nodewarden run exited; see $OUT/run.log" >&2; break; }
  awk -v t="$T" -v s="$SECS" 'BEGIN {exit !(t >= s)}' && break
done
curl -s "127.0.0.1:$PORT/metrics" > "$OUT/metrics.txt"
sort -t$'\t' -k2 -n "$OUT/samples.tsv" | tail -1 | awk -F'\t' '{printf "run peak RSS %.2f GiB at %s s\n", $2 / 1048576, $1}'
