#!/usr/bin/env bash
# Three fedraft nodes "in three data centers" on this machine, with a round-trip delay between
# every pair of data centers injected in user space (fedraft-jepsen's delaying TCP proxies; no
# root, no tc netem), mutual TLS between the nodes and TLS on the API. Then a smoke test:
#
#   1. write (3 clusters + N objects), and measure the write latency seen by the CLI;
#   2. lose the leader's data center (SIGKILL the node and cut every link to it);
#   3. writes continue on the two survivors (time to the first accepted write is printed);
#   4. heal (links back, node restarted on its data directory), wait until it has caught up;
#   5. verify nothing was lost: every object on every node, same state hash at the same index.
#
# Everything lives in a temporary directory that is removed on exit, and every process the
# script started is stopped (trap), whatever happened.
#
# Usage: deploy/local-3dc.sh [--rtt-ms MS] [--objects N] [--keep]
#   --rtt-ms MS   round trip between data centers (default 30; half is added each way)
#   --objects N   objects written before and after the loss (default 10 each)
#   --keep        keep the nodes running after the smoke test until Ctrl-C (prints how to reach them)
# Env: FEDRAFT_BIN / JEPSEN_BIN use prebuilt binaries (else `cargo build` of both, debug profile).
set -euo pipefail
cd "$(dirname "$0")/.."

RTT_MS=30
OBJECTS=10
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rtt-ms) RTT_MS="$2"; shift 2 ;;
    --objects) OBJECTS="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [--rtt-ms MS] [--objects N] [--keep]" >&2; exit 2 ;;
  esac
done

if [ -z "${FEDRAFT_BIN:-}" ] || [ -z "${JEPSEN_BIN:-}" ]; then
  . scripts/env.sh
  cargo build -q -p fedraft -p fedraft-jepsen
  FEDRAFT_BIN="${FEDRAFT_BIN:-$CARGO_TARGET_DIR/debug/fedraft}"
  JEPSEN_BIN="${JEPSEN_BIN:-$CARGO_TARGET_DIR/debug/fedraft-jepsen}"
fi

WORK="$(mktemp -d -t fedraft-3dc.XXXXXX)"
declare -A NODE_PID=()
MESH_PID=""
cleanup() {
  local rc=$?
  for p in "${NODE_PID[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "$MESH_PID" ] && kill "$MESH_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  exec 9>&- 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    echo "local-3dc: FAILED (rc $rc); last node log lines:" >&2
    for n in 1 2 3; do tail -n 5 "$WORK/node$n.log" 2>/dev/null | sed "s/^/  node$n: /" >&2 || true; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf 'local-3dc: %s\n' "$*"; }
now_ms() { date +%s%3N; }

# A port is free when nothing answers on it.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base() {
  local b
  for _ in $(seq 1 50); do
    b=$((20000 + RANDOM % 30000))
    local ok=1
    for off in $(seq 0 29); do port_free $((b + off)) || { ok=0; break; }; done
    [ "$ok" = 1 ] && { echo "$b"; return; }
  done
  echo "no free port range found" >&2; return 1
}
BASE="$(pick_base)"
api_port() { echo $((BASE + $1)); }          # nodes 1..3
peer_port() { echo $((BASE + 10 + $1)); }    # nodes 1..3
MESH_BASE=$((BASE + 20))                     # link a -> b (0-based) listens on MESH_BASE + 3a + b

SECRET="local-3dc-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
TOKEN="local-3dc-admin-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# fedraft refuses a token file that group or others may read.
(umask 077 && echo "$TOKEN admin admin" > "$WORK/tokens")
"$FEDRAFT_BIN" certs --out "$WORK/tls" --node 1=127.0.0.1,localhost --node 2=127.0.0.1,localhost \
  --node 3=127.0.0.1,localhost >/dev/null

for n in 1 2 3; do
  a=$((n - 1))
  {
    echo "node_id = $n"
    echo "cluster_id = \"local-3dc\""
    echo "api_listen = \"127.0.0.1:$(api_port $n)\""
    echo "peer_listen = \"127.0.0.1:$(peer_port $n)\""
    echo "data_dir = \"$WORK/data$n\""
    echo "cluster_secret = \"$SECRET\""
    echo "token_file = \"$WORK/tokens\""
    echo "[peers]"
    for m in 1 2 3; do echo "$m = \"127.0.0.1:$(peer_port $m)\""; done
    # This node reaches each peer through its own proxy link (a -> b), which adds the delay.
    echo "[peer_dial]"
    for m in 1 2 3; do
      [ "$m" = "$n" ] && continue
      echo "\"127.0.0.1:$(peer_port $m)\" = \"127.0.0.1:$((MESH_BASE + 3 * a + m - 1))\""
    done
    echo "[tls]"
    echo "cert_file = \"$WORK/tls/node$n.crt\""
    echo "key_file = \"$WORK/tls/node$n.key\""
    echo "ca_file = \"$WORK/tls/ca.crt\""
  } > "$WORK/node$n.toml"
done

mkfifo "$WORK/mesh.in"
exec 9<>"$WORK/mesh.in"
"$JEPSEN_BIN" mesh --node "127.0.0.1:$(peer_port 1)" --node "127.0.0.1:$(peer_port 2)" \
  --node "127.0.0.1:$(peer_port 3)" --listen-base "$MESH_BASE" --delay-ms $((RTT_MS / 2)) \
  <&9 >"$WORK/mesh.out" 2>"$WORK/mesh.log" &
MESH_PID=$!
mesh() { echo "$*" >&9; }

start_node() {
  RUST_LOG=info,openraft=warn "$FEDRAFT_BIN" server --config "$WORK/node$1.toml" >>"$WORK/node$1.log" 2>&1 &
  NODE_PID[$1]=$!
}
cli() { # cli NODE ARGS...
  local n="$1"; shift
  "$FEDRAFT_BIN" --server "https://127.0.0.1:$(api_port "$n")" --token "$TOKEN" \
    --ca-file "$WORK/tls/ca.crt" "$@"
}
wait_ready() { # wait_ready NODE SECONDS
  local deadline=$(( $(date +%s) + $2 ))
  until cli "$1" status >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { say "node $1 not ready after $2 s"; return 1; }
    sleep 0.2
  done
}
json_field() { # json_field FIELD < json  (numbers, booleans and strings of fedraft's status)
  sed -n "s/^ *\"$1\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" | head -n 1
}
leader() {
  for n in 1 2 3; do
    [ -n "${NODE_PID[$n]:-}" ] || continue
    if [ "$(cli "$n" status --stale 2>/dev/null | json_field isLeader)" = "true" ]; then echo "$n"; return; fi
  done
}
write_objects() { # write_objects NODE PREFIX COUNT: one apply per object, retried until accepted
  local n="$1" prefix="$2" count="$3" i f
  for i in $(seq 1 "$count"); do
    f="$WORK/$prefix-$i.yaml"
    cat > "$f" <<EOF
kind: FederatedObject
metadata: {namespace: smoke, name: $prefix-$i}
template:
  apiVersion: apps/v1
  kind: Deployment
  metadata: {name: $prefix-$i}
  spec: {replicas: 3}
placement:
  replicas: {mode: Divided}
EOF
    local deadline=$(( $(date +%s) + 30 ))
    until cli "$n" apply -f "$f" >/dev/null 2>>"$WORK/cli.err"; do
      [ "$(date +%s)" -lt "$deadline" ] || { say "write $prefix-$i not accepted within 30 s"; return 1; }
      sleep 0.1
    done
  done
}

say "RTT ${RTT_MS} ms between data centers (${WORK})"
for n in 1 2 3; do start_node "$n"; done
for n in 1 2 3; do wait_ready "$n" 60; done
L="$(leader)"
say "cluster up over mutual TLS; leader is node ${L:-?}"

cat > "$WORK/clusters.yaml" <<'EOF'
kind: Cluster
name: dc1
labels: {region: dc1}
apiEndpoint: https://dc1.example:6443
---
kind: Cluster
name: dc2
labels: {region: dc2}
apiEndpoint: https://dc2.example:6443
---
kind: Cluster
name: dc3
labels: {region: dc3}
apiEndpoint: https://dc3.example:6443
EOF
cli 1 apply -f "$WORK/clusters.yaml" >/dev/null
t0=$(now_ms)
write_objects "$L" before "$OBJECTS"
t1=$(now_ms)
say "step 1: wrote $OBJECTS objects at the leader, $(( (t1 - t0) / OBJECTS )) ms per write (CLI process included)"

L="$(leader)"
say "step 2: losing data center of node $L (SIGKILL + every link to it cut)"
mesh "isolate $((L - 1))"
kill -9 "${NODE_PID[$L]}"; wait "${NODE_PID[$L]}" 2>/dev/null || true
unset "NODE_PID[$L]"
SURVIVOR=$(( L % 3 + 1 ))
t0=$(now_ms)
write_objects "$SURVIVOR" after 1
t1=$(now_ms)
say "step 3: first write accepted by the survivors $((t1 - t0)) ms after the loss"
write_objects "$SURVIVOR" after "$OBJECTS"
say "step 3: $OBJECTS writes accepted without data center $L"

mesh heal
start_node "$L"
wait_ready "$L" 60
say "step 4: healed; node $L restarted on its data directory"

expected=$((2 * OBJECTS))
for n in 1 2 3; do
  # A linearizable read: the node has applied everything committed before it answers.
  got=$(cli "$n" get objects -n smoke -o json | grep -c '"kind": "FederatedObject"' || true)
  [ "$got" = "$expected" ] || { say "node $n has $got objects, expected $expected"; exit 1; }
done
deadline=$(( $(date +%s) + 30 ))
while :; do
  s1=$(cli 1 status --stale); s2=$(cli 2 status --stale); s3=$(cli 3 status --stale)
  i1=$(json_field appliedIndex <<<"$s1"); i2=$(json_field appliedIndex <<<"$s2"); i3=$(json_field appliedIndex <<<"$s3")
  if [ "$i1" = "$i2" ] && [ "$i2" = "$i3" ]; then
    h1=$(json_field stateHash <<<"$s1"); h2=$(json_field stateHash <<<"$s2"); h3=$(json_field stateHash <<<"$s3")
    [ "$h1" = "$h2" ] && [ "$h2" = "$h3" ] || { say "state hashes differ at index $i1"; exit 1; }
    break
  fi
  [ "$(date +%s)" -lt "$deadline" ] || { say "nodes never reached the same applied index"; exit 1; }
  sleep 0.05
done
say "step 5: all $expected objects on every node; state hash ${h1:0:16}... at index $i1 on all three"
say "OK"

if [ "$KEEP" = 1 ]; then
  say "nodes keep running until Ctrl-C:"
  for n in 1 2 3; do
    echo "  fedraft --server https://127.0.0.1:$(api_port $n) --ca-file $WORK/tls/ca.crt --token $TOKEN get objects"
  done
  wait
fi
