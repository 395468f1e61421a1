# A one-node Slurm cluster for the integration tests (sourced, not a test itself): its own munged,
# slurmctld and slurmd, run as root, with every file they use (munge key and socket, slurm.conf,
# state, spool, logs) in one temporary directory. It stops exactly what it started, by pid.
#   slurm_cluster_start      starts it and exports SLURM_CONF (so sbatch, srun, scontrol ... talk to
#                            it); on failure returns 1 with the reason in slurm_cluster_reason and
#                            leaves nothing running
#   slurm_cluster_stop       cancels its jobs, stops its daemons, removes its directory; idempotent
#   slurm_cluster_logs       the tail of each daemon's log (for a failing test's output)
#   slurm_job_wait JOB S     waits up to S seconds for a job to end; prints "STATE EXIT_CODE RESTARTS"
#   slurm_job_active JOB     true while a job is queued, running or being requeued
# Settings that keep it fast and self-contained (see README, Slurm):
# - AuthInfo cred_expire=10: Slurm holds a requeued job until cred_expire + 1 seconds have passed
#   (the default 120 s is the two-minute wait a requeued job sees on a stock cluster);
# - SchedulerParameters sched_interval=1: a pending job whose begin time has passed starts at the
#   next full scheduling pass, which by default runs once a minute;
# - MpiDefault=none: the sbatch script must choose --mpi=pmix itself, as it has to on clusters
#   whose default is not pmix.

slurm_cluster_dir=""
slurm_cluster_reason=""
slurm_cluster_version=""
slurm_cluster_host=""
slurm_cluster_pids=()  # the daemons' watchdogs (see _slurm_cluster_daemon), started in this order
# Each daemon runs under `timeout` so that it ends even if the test is killed before its trap runs
# (ctest's per-test limit is 900 s).
slurm_cluster_max_s=900

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

_slurm_cluster_node_idle() { [[ $(sinfo -h -n "$slurm_cluster_host" -o %T 2>/dev/null) == idle ]]; }

slurm_cluster_start() {
  PATH=$PATH:/usr/sbin:/sbin
  if [[ ${STRIDER_TEST_SLURM:-auto} == stand-ins ]]; then
    slurm_cluster_reason="STRIDER_TEST_SLURM=stand-ins"
    return 1
  fi
  if ((EUID != 0)); then
    slurm_cluster_reason="not root: this test's slurmd runs jobs as root"
    return 1
  fi
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
  # A job submitted from inside another Slurm job must not inherit that job's settings.
  local variable
  for variable in $(compgen -e | grep '^SLURM_' | grep -v '^SLURM_CONF$'); do unset "$variable"; done

  local socket=$dir/munge/munge.socket
  mungekey --create --keyfile="$dir/munge/munge.key" >"$dir/log/mungekey.out" 2>&1 ||
    { _slurm_cluster_fail "mungekey failed: $(_slurm_cluster_last_error "$dir/log/mungekey.out")"; return 1; }
  _slurm_cluster_daemon munged munged --foreground --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  _slurm_cluster_wait 10 test -S "$socket" ||
    { _slurm_cluster_fail "munged did not start: $(_slurm_cluster_last_error "$dir/log/munged.out")"; return 1; }

  # The node as slurmd sees it (CPUs, sockets, cores, memory), so that slurmd registers without
  # being drained for a mismatch.
  local node
  node=$(slurmd -C 2>/dev/null | grep '^NodeName=' | head -n 1)
  [[ -n $node ]] || { _slurm_cluster_fail "slurmd -C did not describe this node"; return 1; }
  local cpus
  cpus=$(grep -oE ' CPUs=[0-9]+' <<<"$node" | cut -d= -f2)
  ((${cpus:-0} >= 2)) || { _slurm_cluster_fail "this node has ${cpus:-no} CPUs, the jobs need 2"; return 1; }
  local controller_port node_port
  controller_port=$(_slurm_cluster_free_port) && node_port=$(_slurm_cluster_free_port) ||
    { _slurm_cluster_fail "no free TCP port"; return 1; }
  [[ $controller_port != "$node_port" ]] || { _slurm_cluster_fail "no two free TCP ports"; return 1; }
  # Job ids of their own: Open MPI names a job's shared-memory files after its PMIx namespace
  # (slurm.pmix.JOB.STEP), so two clusters on one host (two test runs at once) must not share ids.
  local first_job_id=$((((RANDOM << 15) | RANDOM) % 50000000 + 1000))
  : >"$dir/plugstack.conf"
  cat >"$SLURM_CONF" <<CONF
ClusterName=strider-test
FirstJobId=$first_job_id
SlurmctldHost=$slurm_cluster_host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$controller_port
SlurmdPort=$node_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
TmpFS=$dir/tmp
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
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$slurm_cluster_host Default=YES MaxTime=INFINITE State=UP
CONF

  _slurm_cluster_daemon slurmctld slurmctld -D -i -f "$SLURM_CONF"
  _slurm_cluster_wait 20 bash -c 'scontrol ping 2>/dev/null | grep -q UP' ||
    { _slurm_cluster_fail "slurmctld did not start: $(_slurm_cluster_last_error "$dir/log/slurmctld.out" "$dir/log/slurmctld.log")"; return 1; }
  _slurm_cluster_daemon slurmd slurmd -D -f "$SLURM_CONF"
  _slurm_cluster_wait 30 _slurm_cluster_node_idle ||
    { _slurm_cluster_fail "node $slurm_cluster_host not idle: $(_slurm_cluster_last_error "$dir/log/slurmd.out" "$dir/log/slurmd.log")"; return 1; }
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
  rm -rf "$slurm_cluster_dir"
  slurm_cluster_dir=""
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
