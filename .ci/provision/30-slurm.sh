#!/usr/bin/env bash
# Slurm for the `slurm` tests: Debian's slurm-wlm + munge as a two-node cluster (n1, n2) on this one host
# (several slurmd with -N; Debian's build has MULTIPLE_SLURMD), plus Ray from PyPI in the CI venv.
# Everything lives under $ROCMKIT_CI_WORK/slurm; daemons run as root in the background. Idempotent.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
base="$work/slurm"
mkdir -p "$base"/{etc,spool,state,log,run} "$base/munge"/{run,log,lib}

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends slurm-wlm munge
fi
"$work/venv/bin/python" -m pip install -q -e '.[slurm]'

# The controller's port, and the two nodes' right above it: ROCMKIT_CI_SLURM_PORT moves them, so a developer's
# own provisioned cluster and a fresh clone's CI check (docs/development.md) run side by side.
ctld_port="${ROCMKIT_CI_SLURM_PORT:-16817}"
node_port=$((ctld_port + 184))
sock="$base/munge/run/munge.socket"
if ! munge -S "$sock" -n >/dev/null 2>&1; then
  [ -f "$base/munge/munge.key" ] || mungekey --create --keyfile="$base/munge/munge.key"
  chmod 600 "$base/munge/munge.key"
  chmod 755 "$work" "$base" "$base/munge" "$base/munge/run"  # munged wants its socket path reachable by all
  munged --key-file="$base/munge/munge.key" --socket="$sock" --pid-file="$base/munge/run/munged.pid" \
    --log-file="$base/munge/log/munged.log" --seed-file="$base/munge/lib/munged.seed" --force
fi

# MinJobAge=5 (default 300): `sbatch --wait`, which the slurm tests submit with, polls the job after 2 s, then 8,
# then every 32 s, growing its interval only while it is below MinJobAge/2 (sbatch.c, _job_wait): with the default a
# job of 12-40 s was seen done 42 s after its submission; with 5 it is polled every 2 s. A finished job's record
# stays at least MinJobAge, longer than that poll. batch_sched_delay=0 (default 3 s): a batch job is placed at its
# submission, not up to 3 s later in the controller's next pass (0.4 s against 0.1-2.8 s here).
conf="$base/etc/slurm.conf"
cat > "$conf" <<CONF
ClusterName=rocmkit
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool/%n
SlurmctldPidFile=$base/run/slurmctld.pid
SlurmdPidFile=$base/run/slurmd-%n.pid
SlurmctldLogFile=$base/log/slurmctld.log
SlurmdLogFile=$base/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=5
SchedulerParameters=batch_sched_delay=0
NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$node_port-$((node_port + 1))] CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$conf"

# A controller still up from a work folder that was deleted and made again at the same path (a second fresh clone
# into /tmp/ci-check while the first one's daemons run) answers the ping but has lost its pid file, spool and logs:
# its jobs fail with "mkdir(.../spool/n1/job...): No such file or directory". Stop it and its nodes, start fresh.
if scontrol ping 2>/dev/null | grep -q UP && [ ! -f "$base/run/slurmctld.pid" ]; then
  echo "the Slurm controller on port $ctld_port lost its folder ($base was deleted under it): starting it again"
  pkill -f -- "slurm(ctld|d) -D -f $conf" || true
  for _ in $(seq 1 30); do pgrep -f -- "slurm(ctld|d) -D -f $conf" >/dev/null || break; sleep 1; done
fi
if ! scontrol ping 2>/dev/null | grep -q UP; then
  # A controller that does not answer to this munge key but holds the port belongs to another work folder.
  if (exec 3<>/dev/tcp/127.0.0.1/"$ctld_port") 2>/dev/null; then
    echo "port $ctld_port is held by a Slurm controller of another ROCMKIT_CI_WORK: stop it (its pid file)" \
         "first, or give this one another port with ROCMKIT_CI_SLURM_PORT" >&2
    exit 1
  fi
  setsid nohup slurmctld -D -f "$conf" >"$base/log/slurmctld.out" 2>&1 < /dev/null &
  for node in n1 n2; do
    setsid nohup slurmd -D -f "$conf" -N "$node" >"$base/log/slurmd-$node.out" 2>&1 < /dev/null &
  done
fi
for _ in $(seq 1 60); do
  [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u | tr -d '\n')" = "idle" ] && break
  sleep 1
done
sinfo -N -o '%N %t %c' || { tail -n 20 "$base/log/slurmctld.log" >&2; exit 1; }
[ "$(sinfo -h -o '%t' | sort -u | tr -d '\n')" = "idle" ] || { echo "slurm nodes are not idle" >&2; exit 1; }
{
  echo "export SLURM_CONF=$conf"
  # Slurm is provisioned: the slurm tests must run, not skip.
  echo "export ROCMKIT_REQUIRE_SLURM=1"
} >> "$work/env"
