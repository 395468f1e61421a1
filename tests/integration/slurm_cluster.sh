# A Slurm cluster for the integration tests (sourced, not a test itself), run as root with every file
# it uses (munge key and socket, slurm.conf, state, spool, logs) in one temporary directory; it stops
# exactly what it started, by pid. Two shapes:
# - one node: munged, slurmctld and slurmd on this machine, on free ports of 127.0.0.1;
# - --hosts N: N real hosts (scripts/cluster/hosts.sh: a network, UTS and mount namespace each, named
#   strider-host-1..N, with their own /24, state folder and /dev/shm), one slurmd in each (its spool,
#   pid file and log named after its node), slurmctld in the hosts' bridge namespace
#   (strider-launch, address .1) and one munged on this machine, whose socket is a path on the file
#   system that every namespace shares. The client commands (sbatch, srun, scontrol, scancel, sinfo,
#   squeue) are small wrappers, first on PATH, that run the real ones in the bridge's namespace when
#   called from this machine's network (in a job they run where they are): the machine's own
#   network is never touched.
#   slurm_cluster_start [--hosts N]
#                            starts it and exports SLURM_CONF (so sbatch, srun, scontrol ... talk to
#                            it); on failure returns 1 with the reason in slurm_cluster_reason and
#                            leaves nothing running
#   slurm_cluster_can_make_hosts
#                            true where --hosts can work (root, nsenter and ip, namespaces allowed);
#                            otherwise returns 1 with the reason in slurm_cluster_reason
#   slurm_cluster_stop       cancels its jobs, stops its daemons, takes its hosts down, removes its
#                            directory; idempotent
#   slurm_cluster_logs       the tail of each daemon's log (for a failing test's output)
#   slurm_job_wait JOB S     waits up to S seconds for a job to end; prints "STATE EXIT_CODE RESTARTS"
#   slurm_job_active JOB     true while a job is queued, running or being requeued
# After a start: slurm_cluster_nodes (the node names, e.g. "strider-host-1 strider-host-2") and
# slurm_cluster_job_env (NAME=VALUE settings a job's environment needs: on hosts, Open MPI's TCP
# transport and out-of-band interfaces restricted to the hosts' /24).
# Settings that keep it fast and self-contained (see README, Slurm):
# - AuthInfo cred_expire=10: Slurm holds a requeued job until cred_expire + 1 seconds have passed
#   (the default 120 s is the two-minute wait a requeued job sees on a stock cluster);
# - SchedulerParameters sched_interval=1: a pending job whose begin time has passed starts at the
#   next full scheduling pass, which by default runs once a minute;
# - MpiDefault=none: the sbatch script must choose --mpi=pmix itself, as it has to on clusters
#   whose default is not pmix.
# - mpi.conf PMIxCollFence=ring: see the comment where it is written.

slurm_cluster_dir=""
slurm_cluster_reason=""
slurm_cluster_version=""
slurm_cluster_host=""
slurm_cluster_path=""  # PATH before the start (the hosts' client wrappers go first)
slurm_cluster_nodes=""
slurm_cluster_job_env=()
slurm_cluster_pids=()  # the daemons' watchdogs (see _slurm_cluster_daemon), started in this order
# Each daemon runs under `timeout`, and the hosts end by themselves a minute later (hosts.sh
# --lifetime), so that they end even if the test is killed before its trap runs (ctest's per-test
# limit is 900 s).
slurm_cluster_max_s=900
slurm_cluster_node_cpus=16

# _slurm_cluster_daemon NAME COMMAND...: runs a daemon in the foreground under a watchdog, output to
# $slurm_cluster_dir/log/NAME.out; appends the watchdog's pid to slurm_cluster_pids.
_slurm_cluster_daemon() {
  local name=$1
  shift
  timeout "$slurm_cluster_max_s" "$@" >"$slurm_cluster_dir/log/$name.out" 2>&1 </dev/null &
  slurm_cluster_pids+=($!)
}

# _slurm_cluster_fail REASON: records why the cluster could not start, stops what did, returns 1.
_slurm_cluster_fail() {
  slurm_cluster_reason=$1
  slurm_cluster_stop
  return 1
}

# _slurm_cluster_last_error LOG...: the last error line of the given logs (or their last line).
_slurm_cluster_last_error() {
  local line
  line=$(cat "$@" 2>/dev/null | grep -i 'error' | tail -n 1)
  [[ -n $line ]] || line=$(cat "$@" 2>/dev/null | tail -n 1)
  echo "${line:-no log}"
}

# _slurm_cluster_free_port: a TCP port on which nothing accepts connections on this host.
_slurm_cluster_free_port() {
  local port
  for _ in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  return 1
}

# _slurm_cluster_wait SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds; returns 1 at
# the deadline or as soon as one of the daemons has exited.
_slurm_cluster_wait() {
  local deadline=$((SECONDS + $1))
  shift
  while ((SECONDS < deadline)); do
    "$@" && return 0
    local pid
    for pid in "${slurm_cluster_pids[@]}"; do kill -0 "$pid" 2>/dev/null || return 1; done
    sleep 0.2
  done
  return 1
}

# _slurm_cluster_nodes_idle: every node of the cluster is idle.
_slurm_cluster_nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)
  [[ $(awk '$2 == "idle" { print $1 }' <<<"$states" | tr '\n' ' ') == "$slurm_cluster_nodes " ]]
}

# The hosts (--hosts): hosts.sh, with a state folder in the cluster's directory and a /24 of its own
# (10.213.200-249, apart from the developers' default and test_hosts.sh's).
slurm_cluster_hosts_script=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts/cluster" && pwd)/hosts.sh
slurm_cluster_hosts=0        # how many hosts this cluster runs on (0: one node, this machine)
slurm_cluster_hosts_net=""
_slurm_cluster_hosts() { STRIDER_HOSTS_DIR=$slurm_cluster_dir/hosts STRIDER_HOSTS_NET=$slurm_cluster_hosts_net "$slurm_cluster_hosts_script" "$@"; }

slurm_cluster_can_make_hosts() {
  if ((EUID != 0)); then
    slurm_cluster_reason="not root: hosts need network, UTS and mount namespaces"
    return 1
  fi
  local command
  for command in unshare nsenter ip; do
    command -v "$command" >/dev/null || { slurm_cluster_reason="no $command for hosts (util-linux, iproute2)"; return 1; }
  done
  unshare --net --uts --mount true 2>/dev/null ||
    { slurm_cluster_reason="this kernel or container does not allow network, UTS and mount namespaces"; return 1; }
}

# _slurm_cluster_client_wrappers: $slurm_cluster_dir/bin/{sbatch,srun,...}, each the real command,
# entered into the bridge's namespaces when called from this machine's network namespace.
_slurm_cluster_client_wrappers() {
  local machine_net bridge_pid command real
  machine_net=$(readlink /proc/self/ns/net)
  bridge_pid=$(cat "$slurm_cluster_dir/hosts/bridge.pid")
  mkdir -p "$slurm_cluster_dir/bin"
  for command in sbatch srun scontrol scancel sinfo squeue; do
    real=$(command -v "$command")
    cat >"$slurm_cluster_dir/bin/$command" <<WRAPPER
#!/bin/sh
# $command of the test cluster on hosts: from this machine's network, in the bridge's namespaces.
if [ "\$(readlink /proc/self/ns/net)" = "$machine_net" ]; then
  exec nsenter -t $bridge_pid --net --uts --mount --wd="\$PWD" -- $real "\$@"
fi
exec $real "\$@"
WRAPPER
    chmod 755 "$slurm_cluster_dir/bin/$command"
  done
  export PATH=$slurm_cluster_dir/bin:$PATH
}

slurm_cluster_start() {
  PATH=$PATH:/usr/sbin:/sbin
  slurm_cluster_hosts=0
  if [[ ${1:-} == --hosts ]]; then
    slurm_cluster_hosts=${2:-}
    [[ $slurm_cluster_hosts =~ ^[1-9]$ ]] || { slurm_cluster_reason="--hosts needs 1..9, got '$slurm_cluster_hosts'"; return 1; }
  fi
  if [[ ${STRIDER_TEST_SLURM:-auto} == stand-ins ]]; then
    slurm_cluster_reason="STRIDER_TEST_SLURM=stand-ins"
    return 1
  fi
  if ((EUID != 0)); then
    slurm_cluster_reason="not root: this test's slurmd runs jobs as root"
    return 1
  fi
  ((slurm_cluster_hosts == 0)) || slurm_cluster_can_make_hosts || return 1
  local command
  for command in munged mungekey slurmctld slurmd sbatch srun scontrol scancel sinfo squeue; do
    if ! command -v "$command" >/dev/null; then
      slurm_cluster_reason="no $command (Debian: munge slurmctld slurmd slurm-client)"
      return 1
    fi
  done
  slurm_cluster_version=$(slurmctld -V | grep -oE '[0-9]+\.[0-9]+' | head -n 1)
  slurm_cluster_host=$(hostname -s)

  # munged refuses a socket whose directories are not searchable by everyone.
  slurm_cluster_dir=$(mktemp -d /tmp/strider-slurm.XXXXXX) || {
    slurm_cluster_reason="cannot create a temporary directory"
    return 1
  }
  chmod 755 "$slurm_cluster_dir"
  local dir=$slurm_cluster_dir
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log" "$dir/tmp"
  chmod 755 "$dir/munge"
  export SLURM_CONF=$dir/slurm.conf
  slurm_cluster_path=$PATH
  # A job submitted from inside another Slurm job must not inherit that job's settings.
  local variable
  for variable in $(compgen -e | grep '^SLURM_' | grep -v '^SLURM_CONF$'); do unset "$variable"; done

  if ((slurm_cluster_hosts > 0)); then
    slurm_cluster_hosts_net=10.213.$((200 + $$ % 50))
    _slurm_cluster_hosts --lifetime $((slurm_cluster_max_s + 60)) up "$slurm_cluster_hosts" >"$dir/log/hosts.out" 2>&1 ||
      { _slurm_cluster_fail "hosts.sh up $slurm_cluster_hosts failed: $(tail -n 1 "$dir/log/hosts.out")"; return 1; }
    _slurm_cluster_client_wrappers
  fi

  local socket=$dir/munge/munge.socket
  mungekey --create --keyfile="$dir/munge/munge.key" >"$dir/log/mungekey.out" 2>&1 ||
    { _slurm_cluster_fail "mungekey failed: $(_slurm_cluster_last_error "$dir/log/mungekey.out")"; return 1; }
  _slurm_cluster_daemon munged munged --foreground --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  _slurm_cluster_wait 10 test -S "$socket" ||
    { _slurm_cluster_fail "munged did not start: $(_slurm_cluster_last_error "$dir/log/munged.out")"; return 1; }

  # Each node claims $slurm_cluster_node_cpus CPUs (slurmd reports what slurm.conf says:
  # SlurmdParameters=config_overrides), so that a test's jobs of 2 ranks a node run side by side on
  # this machine's cores (on hosts every node is this machine), and the memory slurmd -C finds.
  local node
  node=$(slurmd -C 2>/dev/null | grep '^NodeName=' | head -n 1)
  [[ -n $node ]] || { _slurm_cluster_fail "slurmd -C did not describe this node"; return 1; }
  local cpus memory
  cpus=$(grep -oE ' CPUs=[0-9]+' <<<"$node" | cut -d= -f2)
  ((${cpus:-0} >= 2)) || { _slurm_cluster_fail "this node has ${cpus:-no} CPUs, the jobs need 2"; return 1; }
  memory=$(grep -oE ' RealMemory=[0-9]+' <<<"$node" | cut -d= -f2)
  local hardware="CPUs=$slurm_cluster_node_cpus Boards=1 SocketsPerBoard=1 CoresPerSocket=$slurm_cluster_node_cpus"
  hardware+=" ThreadsPerCore=1 RealMemory=${memory:-1}"
  local controller controller_port node_port nodes_line partition_nodes node_files tmp_fs
  if ((slurm_cluster_hosts > 0)); then
    # Namespaces of their own: nothing else listens there, Slurm's own ports are free.
    controller="strider-launch($slurm_cluster_hosts_net.1)" controller_port=6817 node_port=6818
    local addresses="" k
    slurm_cluster_nodes=""
    for ((k = 1; k <= slurm_cluster_hosts; k++)); do
      addresses+=${addresses:+,}$slurm_cluster_hosts_net.$((10 + k))
      slurm_cluster_nodes+=${slurm_cluster_nodes:+ }strider-host-$k
      mkdir -p "$dir/spool/slurmd-strider-host-$k"
    done
    partition_nodes=strider-host-[1-$slurm_cluster_hosts]
    nodes_line="NodeName=$partition_nodes NodeAddr=$addresses $hardware"
    node_files=slurmd-%n
    # Node-local: pmix makes a directory per job step there on each node, named the same on all.
    tmp_fs=/dev/shm
    slurm_cluster_job_env=("OMPI_MCA_btl=self,vader,tcp" OMPI_MCA_btl_tcp_if_include="$slurm_cluster_hosts_net.0/24"
      OMPI_MCA_oob_tcp_if_include="$slurm_cluster_hosts_net.0/24")
  else
    controller_port=$(_slurm_cluster_free_port) && node_port=$(_slurm_cluster_free_port) ||
      { _slurm_cluster_fail "no free TCP port"; return 1; }
    [[ $controller_port != "$node_port" ]] || { _slurm_cluster_fail "no two free TCP ports"; return 1; }
    controller="$slurm_cluster_host(127.0.0.1)"
    slurm_cluster_nodes=$slurm_cluster_host partition_nodes=$slurm_cluster_host
    nodes_line="NodeName=$slurm_cluster_host NodeAddr=127.0.0.1 $hardware"
    node_files=slurmd tmp_fs=$dir/tmp
    mkdir -p "$dir/spool/slurmd"
    slurm_cluster_job_env=()
  fi
  # Job ids of their own: Open MPI names a job's shared-memory files after its PMIx namespace
  # (slurm.pmix.JOB.STEP), so two clusters on one host (two test runs at once) must not share ids.
  local first_job_id=$((((RANDOM << 15) | RANDOM) % 50000000 + 1000))
  : >"$dir/plugstack.conf"
  # The PMIx plugin's fence between nodes as a ring (mpi.conf sits beside slurm.conf). With the
  # plugin's default, a rank of Open MPI 4.1 launched by srun on two hosts died in MPI_Init about
  # once in 200 launches, even of a plain MPI program: btl_tcp called the handler of a message
  # (tag 0x41) that was not registered yet, at address 0; another rank then reported "shared
  # memory initialization ... open(2)". With the ring it did not happen in thousands.
  echo "PMIxCollFence=ring" >"$dir/mpi.conf"
  cat >"$SLURM_CONF" <<CONF
ClusterName=strider-test
FirstJobId=$first_job_id
SlurmctldHost=$controller
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$controller_port
SlurmdPort=$node_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/$node_files
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/$node_files.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/$node_files.log
PlugStackConfig=$dir/plugstack.conf
TmpFS=$tmp_fs
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
$nodes_line State=UNKNOWN
PartitionName=test Nodes=$partition_nodes Default=YES MaxTime=INFINITE State=UP
CONF

  if ((slurm_cluster_hosts > 0)); then
    _slurm_cluster_daemon slurmctld env STRIDER_HOSTS_DIR="$dir/hosts" "$slurm_cluster_hosts_script" \
      exec strider-launch -- slurmctld -D -i -f "$SLURM_CONF"
  else
    _slurm_cluster_daemon slurmctld slurmctld -D -i -f "$SLURM_CONF"
  fi
  _slurm_cluster_wait 20 bash -c 'scontrol ping 2>/dev/null | grep -q UP' ||
    { _slurm_cluster_fail "slurmctld did not start: $(_slurm_cluster_last_error "$dir/log/slurmctld.out" "$dir/log/slurmctld.log")"; return 1; }
  local name
  if ((slurm_cluster_hosts > 0)); then
    for name in $slurm_cluster_nodes; do
      _slurm_cluster_daemon "slurmd-$name" env STRIDER_HOSTS_DIR="$dir/hosts" "$slurm_cluster_hosts_script" \
        exec "$name" -- slurmd -D -N "$name" -f "$SLURM_CONF"
    done
  else
    _slurm_cluster_daemon slurmd slurmd -D -f "$SLURM_CONF"
  fi
  _slurm_cluster_wait 30 _slurm_cluster_nodes_idle ||
    { _slurm_cluster_fail "nodes $slurm_cluster_nodes not idle: $(sinfo -h -N -o '%N %T' 2>/dev/null | tr '\n' ';') $(_slurm_cluster_last_error "$dir"/log/slurmd*)"; return 1; }
  return 0
}

# _slurm_cluster_job_processes: pids of processes this cluster's jobs left behind (job steps and
# their tasks). They carry this cluster's SLURM_CONF: slurmstepd from slurmd, tasks from the
# submitting test; the test's own processes carry no SLURM_JOB_ID.
_slurm_cluster_job_processes() {
  local environ
  for environ in $(grep -lzxF "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ 2>/dev/null); do
    local proc=${environ%/environ}
    if [[ $(cat "$proc/comm" 2>/dev/null) == slurmstepd ]] || grep -qz '^SLURM_JOB_ID=' "$environ" 2>/dev/null; then
      echo "${proc#/proc/}"
    fi
  done
}

# _slurm_cluster_end PID: ends one watchdog and its daemon (TERM, then KILL after 10 s).
_slurm_cluster_end() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    pkill -KILL -P "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid" 2>/dev/null
}

slurm_cluster_stop() {
  [[ -n $slurm_cluster_dir ]] || return 0
  if ((${#slurm_cluster_pids[@]} >= 3)); then
    # Every job on this private cluster is the test's own.
    scancel --quiet --user="$(id -un)" 2>/dev/null
    for _ in $(seq 1 100); do
      [[ -z $(squeue -h -o %A 2>/dev/null) && -z $(_slurm_cluster_job_processes) ]] && break
      sleep 0.2
    done
  fi
  # slurmd, slurmctld, then munged: the reverse of the start.
  local index
  for ((index = ${#slurm_cluster_pids[@]} - 1; index >= 0; index--)); do
    _slurm_cluster_end "${slurm_cluster_pids[index]}"
  done
  slurm_cluster_pids=()
  local leftover
  leftover=$(_slurm_cluster_job_processes)
  if [[ -n $leftover ]]; then
    echo "slurm cluster: killing job processes left behind: $(echo $leftover)" >&2
    kill -KILL $leftover 2>/dev/null
  fi
  # The hosts last: down ends whatever still runs in them.
  [[ -d $slurm_cluster_dir/hosts ]] && _slurm_cluster_hosts down
  [[ -n $slurm_cluster_path ]] && PATH=$slurm_cluster_path
  rm -rf "$slurm_cluster_dir"
  slurm_cluster_dir="" slurm_cluster_path=""
  unset SLURM_CONF
}

slurm_cluster_logs() {
  [[ -n $slurm_cluster_dir ]] || return 0
  local log
  for log in "$slurm_cluster_dir"/log/*; do
    echo "---- $(basename "$log") (last 20 lines)"
    tail -n 20 "$log"
  done
}

# _slurm_job_state JOB: the job's state (PENDING, RUNNING, COMPLETED ...), "STATE EXIT_CODE RESTARTS"
# once it has ended; returns 1 while it is still queued, running or being requeued.
_slurm_job_state() {
  local record state
  record=$(scontrol show job -o "$1" 2>/dev/null)
  state=$(grep -oE 'JobState=[A-Z_]+' <<<"$record" | cut -d= -f2)
  case $state in
    "" | PENDING | RUNNING | CONFIGURING | COMPLETING | REQUEUED | REQUEUE_FED | REQUEUE_HOLD | RESIZING | \
      SUSPENDED | SIGNALING | STAGE_OUT | RESV_DEL_HOLD | STOPPED)
      echo "${state:-UNKNOWN}"
      return 1
      ;;
  esac
  echo "$state $(grep -oE ' ExitCode=[0-9:]+' <<<"$record" | cut -d= -f2) $(grep -oE 'Restarts=[0-9]+' <<<"$record" | cut -d= -f2)"
}

# slurm_job_active JOB: true while the job is queued, running or being requeued.
slurm_job_active() { ! _slurm_job_state "$1" >/dev/null; }

# slurm_job_wait JOB SECONDS: waits until the job has ended and prints "STATE EXIT_CODE RESTARTS",
# e.g. "COMPLETED 0:0 1"; after SECONDS prints the state it is still in and returns 1.
slurm_job_wait() {
  local deadline=$((SECONDS + $2)) state
  until state=$(_slurm_job_state "$1"); do
    ((SECONDS >= deadline)) && { echo "$state (still, after $2 s)"; return 1; }
    sleep 0.5
  done
  echo "$state"
}
