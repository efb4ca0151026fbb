#!/usr/bin/env bash
# A local 3-node Redis Cluster for trying the Redis fingerprint store by hand and for the
# benchmarks: the same settings as the tests' cluster (tests/support/redis_cluster.rs), but on
# fixed ports and daemonized, so it outlives the shell and its address can go into a command.
set -euo pipefail

NODES=3
PORT_BASE="${PORT_BASE:-7000}"
# Low so that a killed node is declared failed, and accepted back, within seconds.
NODE_TIMEOUT_MS=2000
DEADLINE_S=30

usage() {
    cat <<EOF
Usage: scripts/redis-cluster.sh start|stop|status [DIR]

A local Redis Cluster of $NODES masters on 127.0.0.1, ports PORT_BASE..PORT_BASE+$((NODES - 1))
(PORT_BASE=$PORT_BASE; the cluster bus uses each port + 10000), one data directory per node
under DIR (default: target/redis-cluster in the repository).

  start   start the nodes (daemonized) and, the first time, create the cluster; waits until
          it reports cluster_state:ok, then prints the --store argument to use
  stop    shut the nodes down (their append-only files keep the data for the next start)
  status  print each node's cluster_state; exit status 0 only if all are ok

Every write is fsynced before it is acknowledged (appendfsync always). To start from an empty
cluster, stop it and delete DIR.

Needs redis-server and redis-cli: apt-get install -y redis-server
EOF
}

die() {
    echo "redis-cluster.sh: $*" >&2
    exit 1
}

require() {
    command -v "$1" >/dev/null || die "$1 not found: install it (apt-get install -y redis-server)"
}

ports() {
    seq "$PORT_BASE" $((PORT_BASE + NODES - 1))
}

store_arg() {
    local urls=() port
    for port in $(ports); do
        urls+=("redis://127.0.0.1:$port")
    done
    (IFS=,; echo "${urls[*]}")
}

# The pid of the node on $1 if it is running, else nothing (and status 1).
node_pid() {
    local pidfile="$DIR/$1/redis.pid" pid
    [[ -f $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# The value of field $2 in `CLUSTER INFO` of the node on port $1, empty if it does not answer.
cluster_info() {
    { redis-cli -p "$1" cluster info 2>/dev/null || true; } | tr -d '\r' | sed -n "s/^$2://p"
}

pings() {
    [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]]
}

exited() {
    ! kill -0 "$1" 2>/dev/null
}

all_ok() {
    local port
    for port in $(ports); do
        [[ $(cluster_info "$port" cluster_state) == ok ]] || return 1
        [[ $(cluster_info "$port" cluster_slots_assigned) == 16384 ]] || return 1
    done
}

# Runs "$@" (a check) every 0.2 s until it succeeds; dies with $1's description after the deadline.
wait_for() {
    local what=$1
    shift
    local end=$((SECONDS + DEADLINE_S))
    until "$@"; do
        ((SECONDS < end)) || die "timed out after ${DEADLINE_S}s waiting for $what (logs: $DIR/*/redis.log)"
        sleep 0.2
    done
}

write_config() {
    local port=$1 dir="$DIR/$1"
    mkdir -p "$dir"
    cat >"$dir/redis.conf" <<EOF
port $port
bind 127.0.0.1
protected-mode no
daemonize yes
pidfile "$dir/redis.pid"
dir "$dir"
logfile "$dir/redis.log"
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout $NODE_TIMEOUT_MS
appendonly yes
appendfsync always
save ""
EOF
}

start() {
    require redis-server
    require redis-cli
    local port
    for port in $(ports); do
        if node_pid "$port" >/dev/null; then
            echo "node $port already running"
            continue
        fi
        # A port taken by something else would otherwise show only in the node's log.
        if pings "$port"; then
            die "port $port is already serving something not under $DIR; choose another PORT_BASE"
        fi
        write_config "$port"
        redis-server "$DIR/$port/redis.conf"
        echo "node $port started"
    done
    for port in $(ports); do
        wait_for "node $port to answer PING" pings "$port"
    done
    # A node that knows only itself has never been part of a cluster: create one. Nodes
    # restarted from an earlier run find each other again through their nodes.conf.
    if [[ $(cluster_info "$PORT_BASE" cluster_known_nodes) == 1 ]]; then
        echo "creating the cluster"
        local addrs=()
        for port in $(ports); do
            addrs+=("127.0.0.1:$port")
        done
        redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$DIR/cluster-create.log" 2>&1 ||
            die "redis-cli --cluster create failed: see $DIR/cluster-create.log"
    fi
    wait_for "cluster_state:ok on every node" all_ok
    echo "cluster_state:ok; data in $DIR"
    echo "--store $(store_arg)"
}

stop() {
    local port pid pids=()
    for port in $(ports); do
        pid=$(node_pid "$port") || continue
        # Nothing to save: with appendfsync always the AOF already holds every write.
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        pids+=("$port:$pid")
    done
    ((${#pids[@]})) || echo "no node running under $DIR"
    # Waited for after all were told, since a node takes about 1.5 s to exit after SHUTDOWN.
    for pid in "${pids[@]}"; do
        wait_for "node ${pid%%:*} (pid ${pid#*:}) to exit" exited "${pid#*:}"
        echo "node ${pid%%:*} stopped"
    done
}

status() {
    local port pid state ok=1
    for port in $(ports); do
        if pid=$(node_pid "$port"); then
            state=$(cluster_info "$port" cluster_state)
            echo "node $port (pid $pid): cluster_state:${state:-no answer}"
            [[ $state == ok ]] || ok=0
        else
            echo "node $port: not running"
            ok=0
        fi
    done
    if ((ok)); then
        echo "--store $(store_arg)"
    else
        return 1
    fi
}

case "${1:-}" in
-h | --help | help)
    usage
    exit 0
    ;;
start | stop | status) ;;
*)
    usage >&2
    exit 2
    ;;
esac
[[ $# -le 2 ]] || die "too many arguments (see --help)"
[[ $PORT_BASE =~ ^[0-9]+$ ]] && ((PORT_BASE >= 1 && PORT_BASE + NODES - 1 < 55536)) ||
    die "PORT_BASE must be a port such that PORT_BASE+$((NODES - 1))+10000 is one too, got '$PORT_BASE'"
# Absolute, because each node's config names its directory and the nodes run from anywhere.
DIR=$(realpath -m "${2:-$(dirname "$0")/../target/redis-cluster}")
"$1"
