#!/usr/bin/env bash
# A real multi-node Docker swarm on one machine, for the swarm backend's tests and for trying it out.
#
#   bash scripts/swarm-lab.sh up      # bridge, N network namespaces, N dockerds, a swarm, a registry
#   bash scripts/swarm-lab.sh down    # removes everything `up` made, and nothing else
#   bash scripts/swarm-lab.sh status  # what is up, and how to reach each node
#
# Each node is a `dockerd` of its own (own data-root, exec-root, socket, pid file) running in a
# network namespace `swn<i>` whose eth0 (10.77.0.1<i>/24) is a veth on the host bridge swbr0
# (10.77.0.1/24). n1 inits the swarm (manager), the others join as workers. A distribution registry
# (Debian's docker-registry) listens on 10.77.0.1:5000 as a plain process; every node trusts it
# as an insecure registry. Every node's dockerd gives its containers no-new-privileges (as a
# production node would: swarm services on this engine's API cannot ask for it). The main engine's state is never touched: its containers, networks,
# images and swarm state stay as they were (the lab only adds one FORWARD rule for swbr0 and
# removes it on `down`).
#
# Needs root, iproute2, iptables, util-linux (nsenter), dockerd and docker-registry.
# Settings (environment): SWARM_LAB_NODES (default 3), SWARM_LAB_NO_NEW_PRIVILEGES (default 1; 0:
# the dockerds run without --no-new-privileges), SWARM_LAB_DIR (default /var/lib/openenv-swarm-lab),
# SWARM_LAB_LOGS (default /var/log/openenv-swarm-lab: `down` keeps each node's dockerd log there,
# the last 30, and says so when a node's dockerd had already died).
#
# dockerd is started with nsenter --net, not `ip netns exec`: the latter remounts /sys, which hides
# the cgroup mounts, and dockerd then fails with "Devices cgroup isn't mounted".
set -euo pipefail

NODES="${SWARM_LAB_NODES:-3}"
DIR="${SWARM_LAB_DIR:-/var/lib/openenv-swarm-lab}"
LOGS="${SWARM_LAB_LOGS:-/var/log/openenv-swarm-lab}"
BRIDGE=swbr0
NET=10.77.0
HOST_IP="$NET.1"
REGISTRY="$HOST_IP:5000"
# overlay subnets the lab's swarm hands out (swarm's default 10.0.0.0/8 would do; this is explicit)
ADDR_POOL=10.78.0.0/16
MAX_NODES=9
# SWARM_LAB_NO_NEW_PRIVILEGES=0: the nodes' dockerds run without --no-new-privileges
NNP_FLAG=--no-new-privileges
[[ "${SWARM_LAB_NO_NEW_PRIVILEGES:-1}" == 0 ]] && NNP_FLAG=

log() { printf '[swarm-lab] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

node_ip() { echo "$NET.1$1"; }
sock() { echo "$DIR/n$1/docker.sock"; }
dk() { local i=$1; shift; docker -H "unix://$(sock "$i")" "$@"; }
pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

need() {
  for cmd in ip iptables nsenter dockerd docker docker-registry; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd is missing (apt-get install -y iproute2 iptables util-linux docker.io docker-registry)"
  done
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, a bridge, dockerd)"
  [[ "$NODES" =~ ^[1-9]$ ]] || die "SWARM_LAB_NODES must be 1..$MAX_NODES"
}

wait_until() { # seconds, description, command...
  local secs=$1 what=$2; shift 2
  local until=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < until)) || return 1
    sleep 0.2
  done
}

forward_rule() { iptables "$1" FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment openenv-swarm-lab; }

up_bridge() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
    ip addr add "$HOST_IP/24" dev "$BRIDGE"
  fi
  ip link set "$BRIDGE" up
  # the main engine sets FORWARD's policy to DROP, and bridged frames cross FORWARD (br_netfilter)
  forward_rule -C 2>/dev/null || forward_rule -I
}

up_netns() {
  local i=$1 ns="swn$1"
  [[ -e /var/run/netns/$ns ]] || ip netns add "$ns"
  if ! ip link show "swv$i" >/dev/null 2>&1; then
    ip link add "swv$i" type veth peer name "swp$i"
    ip link set "swv$i" master "$BRIDGE"
    ip link set "swv$i" up
    ip link set "swp$i" netns "$ns"
    ip -n "$ns" link set "swp$i" name eth0
    ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" route add default via "$HOST_IP"
  fi
}

up_dockerd() {
  local i=$1 d="$DIR/n$1"
  mkdir -p "$d/data" "$d/exec"
  if pid_alive "$d/dockerd.pid"; then return; fi
  rm -f "$d/dockerd.pid" "$(sock "$i")"
  nsenter --net="/var/run/netns/swn$i" setsid dockerd \
    --data-root "$d/data" --exec-root "$d/exec" -H "unix://$(sock "$i")" --pidfile "$d/dockerd.pid" \
    --insecure-registry "$REGISTRY" --label "openenv-swarm-lab.node=n$i" $NNP_FLAG \
    >"$d/dockerd.log" 2>&1 </dev/null &
  wait_until 60 "dockerd n$i" dk "$i" info || { tail -20 "$d/dockerd.log" >&2; die "dockerd n$i did not come up (log: $d/dockerd.log)"; }
}

up_registry() {
  local d="$DIR/registry"
  mkdir -p "$d/storage"
  if pid_alive "$d/registry.pid"; then return; fi
  cat >"$d/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $d/storage
  delete:
    enabled: true
http:
  addr: $REGISTRY
EOF
  setsid docker-registry serve "$d/config.yml" >"$d/registry.log" 2>&1 </dev/null &
  echo $! >"$d/registry.pid"
  wait_until 30 registry bash -c "exec 3<>/dev/tcp/$HOST_IP/5000" || { tail -20 "$d/registry.log" >&2; die "the registry did not come up"; }
}

swarm_state() { dk "$1" info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null; }

up_swarm() {
  if [[ $(swarm_state 1) != active ]]; then
    dk 1 swarm init --advertise-addr "$(node_ip 1)" --listen-addr "$(node_ip 1):2377" \
      --default-addr-pool "$ADDR_POOL" --default-addr-pool-mask-length 24 >/dev/null
  fi
  local token
  token=$(dk 1 swarm join-token -q worker)
  for ((i = 2; i <= NODES; i++)); do
    if [[ $(swarm_state "$i") != active ]]; then
      dk "$i" swarm join --token "$token" --advertise-addr "$(node_ip "$i")" --listen-addr "$(node_ip "$i"):2377" "$(node_ip 1):2377" >/dev/null
    fi
  done
  ready_nodes() { [[ $(dk 1 node ls --format '{{.Status}}' | grep -c Ready) -ge $NODES ]]; }
  wait_until 60 "nodes ready" ready_nodes || die "not every node is Ready: $(dk 1 node ls)"
}

status() {
  local up=0
  for ((i = 1; i <= MAX_NODES; i++)); do
    [[ -e "$DIR/n$i" ]] || continue
    up=1
    local state
    state=$(swarm_state "$i" || true)
    printf 'n%d  %-12s  docker -H unix://%s   (address %s, netns swn%d, swarm: %s)\n' "$i" "$([[ $i -eq 1 ]] && echo manager || echo worker)" "$(sock "$i")" "$(node_ip "$i")" "$i" "${state:-down}"
  done
  if ((up)); then
    printf 'registry     %s   (storage %s/registry/storage)\n' "$REGISTRY" "$DIR"
    printf 'e.g.: docker -H unix://%s node ls\n' "$(sock 1)"
  else
    echo "the swarm lab is down"
  fi
}

up() {
  need
  local started=$SECONDS
  mkdir -p "$DIR"
  up_bridge
  for ((i = 1; i <= NODES; i++)); do up_netns "$i"; done
  up_registry
  # nodes start one after another: each dockerd takes the xtables lock for its own rules
  for ((i = 1; i <= NODES; i++)); do up_dockerd "$i"; done
  up_swarm
  log "up in $((SECONDS - started)) s: $NODES node(s)"
  status
}

# Copies node i's dockerd log to $LOGS before `down` removes the node's folder (the newest 30 are
# kept). A dockerd that is no longer running here died before `down`: that is said, with its tail.
keep_log() {
  local i=$1 d="$DIR/n$1"
  [[ -f $d/dockerd.log ]] || return 0
  mkdir -p "$LOGS"
  local kept
  kept="$LOGS/$(date +%Y%m%d-%H%M%S)-$$-n$i-dockerd.log"
  cp "$d/dockerd.log" "$kept"
  if [[ -f $d/dockerd.pid ]] && ! pid_alive "$d/dockerd.pid"; then
    log "n$i's dockerd had died before down (log kept at $kept); its last lines:"
    tail -15 "$kept" | sed 's/^/[swarm-lab]   /' >&2
  fi
  ls -1t "$LOGS"/*-dockerd.log 2>/dev/null | tail -n +31 | xargs -r rm -f
}

down() {
  local started=$SECONDS
  # services and stacks first, while the manager answers, so tasks stop cleanly
  if [[ -S $(sock 1) ]] && [[ $(swarm_state 1) == active ]]; then
    dk 1 service ls -q 2>/dev/null | xargs -r docker -H "unix://$(sock 1)" service rm >/dev/null 2>&1 || true
  fi
  for ((i = MAX_NODES; i >= 1; i--)); do
    local d="$DIR/n$i"
    [[ -e $d ]] || continue
    if [[ -S $(sock "$i") ]]; then
      dk "$i" swarm leave --force >/dev/null 2>&1 || true
      dk "$i" ps -aq 2>/dev/null | xargs -r docker -H "unix://$(sock "$i")" rm -f >/dev/null 2>&1 || true
    fi
    keep_log "$i"
    if pid_alive "$d/dockerd.pid"; then
      local pid
      pid=$(cat "$d/dockerd.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    # containerd shims of this node's containers (their command line names this node's exec-root)
    pgrep -f "containerd-shim.*$d/exec" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    # mounts the node left (overlay layers, netns files under its exec-root)
    grep -F " $d/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    ip link del "swv$i" 2>/dev/null || true
    ip netns del "swn$i" 2>/dev/null || true
    rm -rf "$d"
  done
  if pid_alive "$DIR/registry/registry.pid"; then
    kill "$(cat "$DIR/registry/registry.pid")" 2>/dev/null || true
  fi
  rm -rf "$DIR/registry"
  while forward_rule -C 2>/dev/null; do forward_rule -D; done
  ip link del "$BRIDGE" 2>/dev/null || true
  rmdir "$DIR" 2>/dev/null || true
  log "down in $((SECONDS - started)) s"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status   (SWARM_LAB_NODES=${NODES}, SWARM_LAB_DIR=${DIR})" >&2; exit 2 ;;
esac
