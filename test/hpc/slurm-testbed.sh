#!/bin/bash
# A real single-node Slurm (munge, slurmctld, slurmd) for the tests and
# benchmarks, everything on 127.0.0.1, all state under one directory.
#   slurm-testbed.sh start DIR   (as root) starts it; prints SLURM_CONF=...
#   slurm-testbed.sh stop DIR    stops exactly the daemons it started
# Clients (srun, sinfo) need SLURM_CONF=DIR/slurm.conf in their environment.
set -euo pipefail
. "$(dirname "$0")/slurm-common.sh"
cmd=${1:?usage: slurm-testbed.sh start|stop DIR}
dir=${2:?usage: slurm-testbed.sh start|stop DIR}

stop() {
  for d in slurmd slurmctld munged; do
    local pidfile="$dir/$d.pid"
    [ -s "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: slurm-testbed.sh start|stop DIR" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "slurm-testbed: start it as root" >&2; exit 1; }
for c in munged slurmctld slurmd srun sinfo; do
  command -v "$c" >/dev/null || { echo "slurm-testbed: $c missing (munge slurmctld slurmd slurm-client)" >&2; exit 1; }
done

stop
rm -rf "$dir"
install -d -m 0755 "$dir" "$dir/state" "$dir/spool"
host=$(hostname -s)
# slurmd finds itself by name: the short host name must resolve.
getent hosts "$host" >/dev/null || echo "127.0.0.1 $host" >>/etc/hosts
install -d -m 0755 "$dir/spool/$host"

start_munge "$dir"
cp "$dir/munge/munged.pid" "$dir/munged.pid"

cpus=$(nproc)
{
  echo "ClusterName=rt"
  echo "SlurmctldHost=$host(127.0.0.1)"
  slurm_conf_common "$dir"
  cat <<EOF
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
} >"$dir/slurm.conf"
export SLURM_CONF="$dir/slurm.conf"
slurmctld -i -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.1
done
if [ "$state" != idle ]; then
  echo "slurm-testbed: the node did not come up (state: ${state:-none}); logs in $dir" >&2
  tail -n 5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
  stop
  exit 1
fi
echo "SLURM_CONF=$SLURM_CONF"
