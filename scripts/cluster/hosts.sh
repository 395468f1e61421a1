#!/usr/bin/env bash
# Real hosts on one machine for multi-node tests: each host is a network namespace with an eth0 of
# its own (a veth to a bridge in a namespace of its own), a UTS namespace (hostname strider-host-K:
# how Open MPI tells which ranks share a node) and a mount namespace with a /dev/shm of its own. The
# machine's own interfaces, routes and firewall are never touched. See --help.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: scripts/cluster/hosts.sh [OPTIONS] COMMAND
  up N                              bring N hosts up (strider-host-1..N); idempotent
  run N RANKS_PER_HOST -- CMD...    mpirun CMD on N hosts x RANKS_PER_HOST ranks (ranks 0..R-1 on
                                    host 1, and so on); brings the hosts up first if they are not,
                                    and takes them down again afterwards if it did
  status                            the hosts that are up, one line each
  exec HOST -- CMD...               CMD in HOST's namespaces (strider-host-K, or strider-launch
                                    for the bridge's), in the current directory; exec'd, so CMD
                                    keeps the caller's pid, environment and exit status
  down                              remove every host, the bridge and their processes; idempotent
Options (before COMMAND):
  --rate R        shape every host's link both ways with tc tbf (e.g. 1gbit, 200mbit). This
                  kernel has no netem: no added delay or loss, only a rate.
  --shm-size S    size of each host's /dev/shm tmpfs (default: tmpfs's, half of RAM)
  --timeout S     run: stop mpirun after S seconds (exit 124)
  --lifetime S    up: each host's holder ends by itself after S seconds (default: never), so that
                  hosts brought up by a test that is killed before its cleanup do not stay forever
  -h, --help      this text
Environment:
  STRIDER_HOSTS_NET   the /24 the hosts use, first three octets (default 10.213.0); its addresses
                      exist only inside the namespaces: the bridge is .1, host K is .(10+K)
  STRIDER_HOSTS_DIR   state (holder pids, hostfile, /etc/hosts, the launch agent); default
                      /run/strider-hosts
How it works: one long-lived process per host (and one for the bridge) holds the namespaces; the
rsh agent that mpirun uses instead of ssh enters a host's namespaces with nsenter. The hosts share
the machine's file system (only /dev/shm, /etc/hosts, the hostname and the network differ), so every
path, including the apps' and orted's, is the same on every host. mpirun runs in the bridge's
namespace (hostname strider-launch, runs no rank) with btl self,vader,tcp and the oob and btl TCP
interfaces restricted to the hosts' /24. Needs root, unshare, nsenter, ip (and tc for --rate).
EOF
}

net=${STRIDER_HOSTS_NET:-10.213.0}
state=${STRIDER_HOSTS_DIR:-/run/strider-hosts}
rate="" shm_size="" run_timeout="" lifetime=infinity
die() {
  echo "hosts.sh: $*" >&2
  exit 2
}

while (($#)); do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --shm-size) shm_size=${2:?--shm-size needs a value}; shift 2 ;;
    --timeout) run_timeout=${2:?--timeout needs a value}; shift 2 ;;
    --lifetime) lifetime=${2:?--lifetime needs a value}; shift 2 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
  esac
done
(($#)) || { usage >&2; exit 2; }
command=$1
shift

[[ $lifetime == infinity || $lifetime =~ ^[1-9][0-9]*$ ]] || die "--lifetime must be a number of seconds, got '$lifetime'"
[[ $net =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "STRIDER_HOSTS_NET must be three octets such as 10.213.0, got '$net'"
subnet=$net.0/24

# Refusals, one line each.
preflight() {
  ((EUID == 0)) || die "needs root (network, UTS and mount namespaces); run it as root"
  local tool
  for tool in unshare nsenter ip; do command -v $tool >/dev/null || die "needs $tool (util-linux / iproute2)"; done
  [[ -z $rate ]] || command -v tc >/dev/null || die "--rate needs tc (iproute2)"
  unshare --net --uts --mount true 2>/dev/null ||
    die "this kernel or container does not allow network, UTS and mount namespaces (unshare --net --uts --mount failed)"
}

holder_pid() { cat "$state/$1.pid"; }
in_ns() { # in_ns NAME COMMAND...: COMMAND in NAME's network, UTS and mount namespaces
  local pid
  pid=$(holder_pid "$1")
  shift
  nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

# start_holder NAME: a process in new network, UTS and mount namespaces, hostname NAME, its own
# /dev/shm and the hosts' /etc/hosts; it sleeps until down kills it (or --lifetime ends).
start_holder() {
  local name=$1 options=""
  [[ -z $shm_size ]] || options="-o size=$shm_size"
  rm -f "$state/$name.ready"
  # setsid: out of the caller's session, so that a terminal's or a test's signals leave it alone.
  setsid unshare --net --uts --mount --propagation private -- bash -c '
    name=$1 state=$2 options=$3 lifetime=$4
    hostname "$name"
    mount -t tmpfs $options tmpfs /dev/shm
    mount --bind "$state/etc-hosts" /etc/hosts
    ip link set lo up
    echo $$ >"$state/$name.pid"
    touch "$state/$name.ready"
    exec -a strider-hosts-holder sleep "$lifetime"' strider-hosts-holder "$name" "$state" "$options" "$lifetime" \
    </dev/null >/dev/null 2>"$state/$name.err" &
  local starter=$! deadline=$((SECONDS + 10))
  until [[ -e $state/$name.ready ]]; do
    kill -0 "$starter" 2>/dev/null || [[ ! -s $state/$name.err ]] || die "could not start $name: $(head -n 1 "$state/$name.err")"
    ((SECONDS < deadline)) || die "$name did not start within 10 s"
    sleep 0.02
  done
}
# holder_alive NAME: the process holding NAME's namespaces is alive and is ours (its command line
# is "strider-hosts-holder infinity", or the --lifetime's seconds).
holder_alive() {
  local pid
  pid=$(cat "$state/$1.pid" 2>/dev/null) || return 1
  [[ -r /proc/$pid/cmdline ]] && [[ $(tr '\0' ' ' <"/proc/$pid/cmdline") == "strider-hosts-holder "* ]]
}

hosts_up() { cat "$state/count" 2>/dev/null || echo 0; }

shape() { # shape NAME DEVICE: tbf at $rate on DEVICE inside NAME's namespace
  [[ -z $rate ]] || in_ns "$1" tc qdisc replace dev "$2" root tbf rate "$rate" burst 64kb latency 50ms
}

up() {
  local count=$1 k
  [[ $count =~ ^[1-9][0-9]?$ ]] && ((count <= 200)) || die "up: N must be 1..200, got '$count'"
  preflight
  if [[ $(hosts_up) == "$count" ]] && holder_alive bridge && [[ $(cat "$state/rate" 2>/dev/null) == "$rate" ]]; then
    local all=1
    for ((k = 1; k <= count; k++)); do holder_alive "strider-host-$k" || all=0; done
    ((all)) && return 0
  fi
  down_all
  mkdir -p "$state"
  trap 'status=$?; ((status == 0)) || down_all; exit $status' EXIT
  {
    echo "127.0.0.1 localhost"
    echo "$net.1 strider-launch"
    for ((k = 1; k <= count; k++)); do echo "$net.$((10 + k)) strider-host-$k"; done
  } >"$state/etc-hosts"
  : >"$state/hostfile"
  start_holder strider-launch
  mv "$state/strider-launch.pid" "$state/bridge.pid"
  in_ns bridge ip link add br0 type bridge
  in_ns bridge ip addr add "$net.1/24" dev br0
  in_ns bridge ip link set br0 up
  for ((k = 1; k <= count; k++)); do
    local host=strider-host-$k
    start_holder "$host"
    # The pair is made in the bridge's namespace and one end moved to the host's: nothing in the
    # machine's own namespace, not even for a moment.
    in_ns bridge ip link add "vh$k" type veth peer name eth0 netns "/proc/$(holder_pid "$host")/ns/net"
    in_ns bridge ip link set "vh$k" master br0 up
    in_ns "$host" ip addr add "$net.$((10 + k))/24" dev eth0
    in_ns "$host" ip link set eth0 up
    shape bridge "vh$k"
    shape "$host" eth0
    echo "$host slots=64" >>"$state/hostfile"
  done
  write_agent
  echo "$rate" >"$state/rate"
  echo "$count" >"$state/count"
  trap - EXIT
  echo "hosts.sh: $count hosts up on $subnet${rate:+, links at $rate}"
}

# The rsh agent: "agent [OPTIONS] HOST COMMAND..." runs COMMAND (a shell line, as ssh would) in
# HOST's namespaces, in the launcher's working directory.
write_agent() {
  cat >"$state/agent" <<EOF
#!/bin/sh
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1
shift
pid=\$(cat "$state/\$host.pid") || { echo "hosts.sh agent: no host \$host" >&2; exit 255; }
exec nsenter -t "\$pid" --net --uts --mount --wd="\$PWD" -- /bin/sh -c "\$*"
EOF
  chmod +x "$state/agent"
}

# down_all: kills every process in the hosts' namespaces (the holders and anything started in them),
# which removes the namespaces, their veths and the bridge; then the state.
down_all() {
  [[ -d $state ]] || return 0
  local file pid uts victims=()
  for file in "$state"/*.pid; do
    [[ -e $file ]] || continue
    pid=$(cat "$file")
    [[ -r /proc/$pid/cmdline && $(tr '\0' ' ' <"/proc/$pid/cmdline") == "strider-hosts-holder "* ]] || continue
    uts=$(readlink "/proc/$pid/ns/uts") || continue
    local proc
    for proc in /proc/[0-9]*; do
      [[ $(readlink "$proc/ns/uts" 2>/dev/null) == "$uts" ]] && victims+=("${proc#/proc/}")
    done
  done
  if ((${#victims[@]})); then
    kill -TERM "${victims[@]}" 2>/dev/null || true
    local deadline=$((SECONDS + 5)) v alive
    while :; do
      alive=()
      for v in "${victims[@]}"; do kill -0 "$v" 2>/dev/null && alive+=("$v"); done
      ((${#alive[@]})) || break
      if ((SECONDS >= deadline)); then kill -KILL "${alive[@]}" 2>/dev/null || true; break; fi
      sleep 0.05
    done
  fi
  rm -rf "$state"
}

status_hosts() {
  local count k
  count=$(hosts_up)
  ((count > 0)) || { echo "no hosts up"; return 0; }
  holder_alive bridge && echo "bridge: strider-launch $net.1 (pid $(holder_pid bridge))" || echo "bridge: down"
  for ((k = 1; k <= count; k++)); do
    if holder_alive "strider-host-$k"; then
      echo "strider-host-$k: $net.$((10 + k)) (pid $(holder_pid "strider-host-$k"))"
    else
      echo "strider-host-$k: down"
    fi
  done
}

run() {
  (($# >= 3)) && [[ $3 == -- ]] || die "usage: run N RANKS_PER_HOST -- COMMAND..."
  local count=$1 per_host=$2
  shift 3
  (($#)) || die "run: no command"
  [[ $per_host =~ ^[1-9][0-9]*$ ]] || die "run: RANKS_PER_HOST must be >= 1, got '$per_host'"
  local brought_up=0
  if [[ $(hosts_up) != "$count" ]] || ! holder_alive bridge; then
    up "$count" >/dev/null
    brought_up=1
  else
    preflight
  fi
  # Down again on any exit (a failed or timed-out command too) if this run brought the hosts up.
  # shellcheck disable=SC2064
  ((brought_up)) && trap "down_all" EXIT
  trap 'exit 143' TERM INT
  local hostfile=$state/hostfile.$$ k
  for ((k = 1; k <= count; k++)); do echo "strider-host-$k slots=$per_host"; done >"$hostfile"
  local limit=()
  [[ -z $run_timeout ]] || limit=(timeout -k 5 "$run_timeout")
  local status=0
  in_ns bridge env \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none \
    OMPI_MCA_btl_tcp_if_include="$subnet" OMPI_MCA_oob_tcp_if_include="$subnet" \
    OMPI_MCA_plm_rsh_agent="$state/agent" OMPI_MCA_plm_rsh_no_tree_spawn=1 \
    "${limit[@]}" mpirun --hostfile "$hostfile" -np $((count * per_host)) --map-by slot --bind-to none "$@" ||
    status=$?
  rm -f "$hostfile"
  return $status
}

# exec_in HOST -- COMMAND...: replaces this shell with COMMAND in HOST's namespaces.
exec_in() {
  if (($# < 3)) || [[ $2 != -- ]]; then die "usage: exec HOST -- COMMAND..."; fi
  local name=$1 host=$1
  shift 2
  [[ $name == strider-launch ]] && host=bridge
  holder_alive "$host" || die "exec: $name is not up (see status)"
  exec nsenter -t "$(holder_pid "$host")" --net --uts --mount --wd="$PWD" -- "$@"
}

case $command in
  up) (($# == 1)) || die "usage: up N"; up "$1" ;;
  run) run "$@" ;;
  down) ((EUID == 0)) || die "needs root"; down_all ;;
  status) status_hosts ;;
  exec) ((EUID == 0)) || die "needs root"; exec_in "$@" ;;
  *) die "unknown command '$command' (see --help)" ;;
esac
