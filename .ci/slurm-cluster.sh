#!/usr/bin/env bash
# A real single-node SLURM cluster from Debian packages (bookworm: slurm-wlm 22.05) for the test of
# `factorbench sweep --engine slurm` (tests/test_slurm_cluster.py): submitit job arrays, preemption, requeue at
# the time limit, scancel, sacct. Runs as root, needs no systemd and no cgroups (works inside containers):
# proctrack/linuxproc, task/none. Accounting: slurmdbd on a MariaDB reached through its Unix socket only, so
# that `sacct` works.
#
#   bash .ci/slurm-cluster.sh            # install, configure, start; checks sinfo, srun, sbatch, sacct
#   bash .ci/slurm-cluster.sh --stop     # stop every daemon it started (by pid file), leave the install
#
# Idempotent (about 30 s when the packages are installed). Environment (optional): SLURM_CPUS (default
# nproc, at least 4), SLURM_MEM_MB (RealMemory, default 20000), SLURM_PARTITION (default debug).
# Partitions: $SLURM_PARTITION (default, PriorityTier 1, GraceTime 5 s) and 'urgent' (PriorityTier 10), with
# PreemptType=preempt/partition_prio + PreemptMode=REQUEUE:
#   sbatch -p urgent -c $(nproc) --wrap 'sleep 1'   # preempts and requeues the jobs of the default partition
# Timings are short so that a test sees preemption and requeue within seconds (a production cluster's are
# minutes): GraceTime 5 s, KillWait 5 s, requeued jobs eligible after 10 s (cred_expire), backfill every 2 s.
set -euo pipefail

NODE=$(hostname -s)
# at least 4 CPUs, more than a 2-core machine has (config_overrides): the test runs 3 jobs side by side
CPUS=${SLURM_CPUS:-$(( $(nproc) < 4 ? 4 : $(nproc) ))}
MEM=${SLURM_MEM_MB:-20000}
PARTITION=${SLURM_PARTITION:-debug}
RUN=/run/slurm
DBPASS=slurmdbpw

log() { printf '\n== %s\n' "$*"; }

stop_all() {
  for f in "$RUN/slurmd.pid" "$RUN/slurmctld.pid" "$RUN/slurmdbd.pid" /run/mysqld/mysqld.pid /run/munge/munged.pid; do
    pid=$(cat "$f" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      echo "stopping $pid ($f)"; kill "$pid" || true
      for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
  done
}
if [ "${1:-}" = "--stop" ]; then stop_all; exit 0; fi

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local n=$1 what=$2; shift 2
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "timed out waiting for $what" >&2; return 1
}

log "1. packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
  munge slurm-wlm slurmctld slurmd slurm-client slurmdbd mariadb-server

log "2. the node name must resolve to this machine"
getent hosts "$NODE" >/dev/null || echo "127.0.0.1 $NODE" >> /etc/hosts
getent hosts "$NODE"

log "3. munge (authentication)"
install -d -o munge -g munge -m 0700 /etc/munge /var/log/munge
install -d -o munge -g munge -m 0711 /var/lib/munge
install -d -o munge -g munge -m 0755 /run/munge
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged
fi
wait_for 15 munged sh -c 'munge -n | unmunge'
munge -n | unmunge | grep STATUS

log "4. MariaDB for slurmdbd (Unix socket only)"
install -d -o mysql -g mysql -m 0755 /run/mysqld
[ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
if ! mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1; then
  runuser -u mysql -- /usr/sbin/mariadbd --skip-networking --socket=/run/mysqld/mysqld.sock \
    --pid-file=/run/mysqld/mysqld.pid --datadir=/var/lib/mysql --log-error=/var/log/mysql-slurm.err \
    --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
fi
wait_for 60 mariadb mariadb-admin --socket=/run/mysqld/mysqld.sock ping
mariadb --socket=/run/mysqld/mysqld.sock -e "
  CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

log "5. SLURM configuration"
install -d -o slurm -g slurm -m 0755 /etc/slurm /var/spool/slurmctld /var/log/slurm "$RUN"
install -d -o root -g root -m 0755 /var/spool/slurmd
cat > /etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
EOF
chown slurm:slurm /etc/slurm/slurmdbd.conf; chmod 0600 /etc/slurm/slurmdbd.conf

cat > /etc/slurm/slurm.conf <<EOF
# single-node test cluster (written by .ci/slurm-cluster.sh)
ClusterName=fbtest
SlurmctldHost=$NODE
AuthType=auth/munge
AuthInfo=cred_expire=10
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups: they are unavailable or read-only in containers
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=10
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=2000
ReturnToService=2
SlurmctldTimeout=60
SlurmdTimeout=60
SlurmdParameters=config_overrides
KillWait=5
MinJobAge=600
InactiveLimit=0
MaxArraySize=10001
# preemption: a job in 'urgent' requeues the jobs of '$PARTITION' it needs room for (SIGTERM, GraceTime, requeue)
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=$NODE CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=5
PartitionName=urgent Nodes=$NODE MaxTime=INFINITE State=UP PriorityTier=10
EOF
chmod 0644 /etc/slurm/slurm.conf

log "6. daemons: slurmdbd, cluster registration, slurmctld, slurmd"
if ! { [ -s "$RUN/slurmdbd.pid" ] && kill -0 "$(cat "$RUN/slurmdbd.pid")" 2>/dev/null; }; then /usr/sbin/slurmdbd; fi
wait_for 60 slurmdbd sacctmgr -n list cluster
sacctmgr -i -Q add cluster fbtest >/dev/null 2>&1 || true
sacctmgr -i -Q add account fbtest Cluster=fbtest Description=test Organization=test >/dev/null 2>&1 || true
sacctmgr -i -Q add user root Account=fbtest >/dev/null 2>&1 || true
# (re)start slurmctld and slurmd so that they read this slurm.conf (PreemptType and node changes need a restart;
# running jobs survive it)
for d in slurmd slurmctld; do
  pid=$(cat "$RUN/$d.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
done
/usr/sbin/slurmctld
wait_for 60 slurmctld scontrol ping
/usr/sbin/slurmd
wait_for 60 "node $NODE idle" sh -c "sinfo -h -n $NODE -o %T | grep -qE '^(idle|mixed|allocated)'"
scontrol update NodeName="$NODE" State=RESUME 2>/dev/null || true  # a node left DOWN by an earlier run

log "7. checks"
sinfo
srun -N1 -n1 hostname
JOB=$(sbatch --parsable -o /tmp/slurm-check-%j.out --wrap 'echo sbatch ok on $(hostname) job $SLURM_JOB_ID')
wait_for 60 "sbatch job $JOB" sh -c "test -z \"\$(squeue -h -j $JOB)\""
cat "/tmp/slurm-check-$JOB.out"
wait_for 30 "sacct record of $JOB" sh -c "sacct -n -X -j $JOB -o State | grep -q COMPLETED"
sacct -j "$JOB" -o JobID,JobName,State,ExitCode,Elapsed

log "SLURM is up: sinfo / squeue / sacct; stop with: bash $0 --stop"
