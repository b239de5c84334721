# shellcheck shell=bash
# A real single-node Slurm cluster from Debian's packages (slurm-wlm, munge), for
# tests/integration/test_cluster_slurm.sh and bench/bench_cluster.sh (sourced).
# Everything lives in one directory: munged with its own key, socket and pid file;
# slurmctld and slurmd in the foreground (-D) as root, on free ports, with state,
# spool and logs there, no accounting, no cgroups (proctrack/linuxproc, task/none).
# The caller defines fail and skip (tests/integration/lib.sh, bench/lib.sh).
# SLURM_CONF is exported, so sbatch, squeue, scontrol and the jobs find the cluster.

SLURM_PIDS=()

slurm_stop() {
  local p
  for p in "${SLURM_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${SLURM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  SLURM_PIDS=()
}

# slurm_missing: prints what is missing for a cluster here ("" when nothing is).
slurm_missing() {
  local t missing=()
  for t in slurmctld slurmd munged sbatch squeue scontrol scancel; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
  done
  if ((${#missing[@]})); then
    echo "${missing[*]} not installed (Debian: apt-get install slurm-wlm munge; scripts/install-deps.sh --with-tests)"
  elif [[ $(id -u) != 0 ]]; then
    echo "a Slurm cluster for the test runs its daemons as root (SlurmUser=root); run as root"
  fi
}

slurm_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# slurm_start DIR SLOTS: starts the cluster in DIR with SLOTS task slots (CPUs, more
# than the machine's via config_overrides), waits until its node is idle. Sets
# SLURM_DIR. The caller stops it with slurm_stop (e.g. in its EXIT trap).
slurm_start() {
  SLURM_DIR=$1
  local slots=$2 host i
  mkdir -p "$SLURM_DIR"/{state,spool,munge}
  chmod 700 "$SLURM_DIR/munge"
  dd if=/dev/urandom of="$SLURM_DIR/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$SLURM_DIR/munge/munge.key"
  munged --force --key-file="$SLURM_DIR/munge/munge.key" --socket="$SLURM_DIR/munge/munge.sock" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/munge/munged.log" \
    --seed-file="$SLURM_DIR/munge/munged.seed" >"$SLURM_DIR/munge/start.log" 2>&1 ||
    fail "munged did not start: $(cat "$SLURM_DIR/munge/start.log" "$SLURM_DIR/munge/munged.log" 2>/dev/null)"
  SLURM_PIDS+=("$(cat "$SLURM_DIR/munge/munged.pid")")
  host=$(hostname -s)
  cat >"$SLURM_DIR/slurm.conf" <<CONF
ClusterName=sbtest
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(slurm_free_port)
SlurmdPort=$(slurm_free_port)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge/munge.sock
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=$slots RealMemory=4096 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF=$SLURM_DIR/slurm.conf
  slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_DIR/slurmctld.out" 2>&1 &
  SLURM_PIDS+=($!)
  slurmd -D -f "$SLURM_CONF" -N "$host" >"$SLURM_DIR/slurmd.out" 2>&1 &
  SLURM_PIDS+=($!)
  for i in $(seq 300); do
    if sinfo -h -o '%T' 2>/dev/null | grep -qx idle; then return 0; fi
    sleep 0.1
  done
  fail "the Slurm node did not come up idle: $(sinfo 2>&1; tail -5 "$SLURM_DIR"/slurmctld.log "$SLURM_DIR"/slurmd.log "$SLURM_DIR"/*.out 2>&1)"
}
