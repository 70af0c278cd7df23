#!/bin/bash
# A real Slurm cluster of N compute nodes on one machine, for the
# multi-node tests and benchmarks (as root):
#   cluster.sh start N DIR [SHARED...]   munge, slurmctld on `head`, a slurmd per node
#   cluster.sh stop DIR                  stops exactly what start began
#   cluster.sh on NODE [--user U] CMD... runs CMD on `head` or `nodeK` (K = 1..N)
#   sudo DIR/on NODE CMD...              the same as the calling user (for the
#                                        tests' unprivileged user; sudoers names DIR/on)
# Every machine (head, node1..nodeN) is a long-lived keeper process with
# its own network, mount and UTS namespaces: a veth into a bridge that
# lives in a namespace of the cluster's own (addresses 10.77.0.0/24 exist
# only in those namespaces; the host's network is never touched), its own
# host name, /etc/hosts naming every machine, its own boot id and
# /sys/class/net, and private /tmp, /var/tmp, /dev/shm and /run (so what rt
# keeps per node, its default store in /var/tmp included, is per node).
# DIR and every SHARED path are the same directories at the same paths on
# every machine (the parallel file system: home directories already are,
# /home lying outside what is private); DIR/local is each node's own (its
# local SSD). Clients run on head: `cluster.sh on head --user U srun ...`
# (SLURM_CONF is set there).
set -euo pipefail
usage() { echo "usage: cluster.sh start N DIR [SHARED...] | stop DIR | on NODE [--user U] CMD..." >&2; exit 2; }
cmd=${1:-}
net=10.77.0

keeper_of() { cat "$dir/machines/$1.pid" 2>/dev/null || true; }

stop() {
  # Daemons first (slurmd, slurmctld, munged), then the machines' keepers
  # and the switch: their namespaces go with them.
  local f pid
  for f in "$dir"/pids/*.pid "$dir"/machines/*.pid "$dir/switch.pid"; do
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

case $cmd in
  stop)
    dir=${2:?$(usage)}
    stop
    exit 0
    ;;
  on)
    [ $# -ge 3 ] || usage
    dir=${CLUSTER_DIR:-}
    node=$2
    shift 2
    [ -n "$dir" ] || { echo "cluster.sh on: set CLUSTER_DIR to the cluster's DIR" >&2; exit 2; }
    as=()
    if [ "${1:-}" = --user ]; then as=(runuser -u "$2" --); shift 2; fi
    pid=$(keeper_of "$node")
    [ -n "$pid" ] || { echo "cluster.sh on: no machine \`$node\` in $dir" >&2; exit 2; }
    # The machine's namespaces, in the caller's working directory where
    # that exists there (else /); CMD's words are arguments, never a script.
    exec nsenter -t "$pid" -n -m -u -- "${as[@]}" env SLURM_CONF="$dir/slurm.conf" \
      sh -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "$PWD" "$@"
    ;;
  start) ;;
  *) usage ;;
esac

n=${2:?$(usage)}
dir=${3:?$(usage)}
shift 3
[[ $n =~ ^[1-9][0-9]?$ ]] && [ "$n" -le 32 ] || { echo "cluster.sh: N is 1 to 32" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "cluster.sh: start it as root" >&2; exit 1; }
for c in munged slurmctld slurmd srun sinfo nsenter unshare ip; do
  command -v "$c" >/dev/null || { echo "cluster.sh: $c missing (munge slurmctld slurmd slurm-client iproute2)" >&2; exit 1; }
done
dir=$(realpath -m "$dir")
shared=("$dir" "$@")
. "$(dirname "$0")/slurm-common.sh"

[ ! -d "$dir" ] || stop
rm -rf "$dir"
install -d -m 0755 "$dir" "$dir/state" "$dir/spool" "$dir/pids" "$dir/machines" "$dir/logs" "$dir/local"
echo "CLUSTER_DIR=$dir" >"$dir/cluster.env"
machines=(head)
for i in $(seq "$n"); do machines+=("node$i"); done
addr_of() { [ "$1" = head ] && echo "$net.254" || echo "$net.${1#node}"; }

{
  echo "127.0.0.1 localhost"
  for m in "${machines[@]}"; do echo "$(addr_of "$m") $m"; done
} >"$dir/hosts"

# A keeper: `sleep` in new network, mount and UTS namespaces, for as long
# as the cluster runs. Mounts made in its namespace stay private to it.
# It is returned once it runs `sleep`: before that, unshare may not have
# made its namespaces yet (or made its mounts private), and nsenter would
# enter the host's (seen on a loaded machine: the peer `eth0` of a veth
# made in the host's network namespace, "File exists").
keeper() {
  unshare --net --mount --uts --propagation private -- sleep infinity </dev/null >/dev/null 2>&1 &
  local pid=$! tries=0
  until [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ]; do
    [ $((tries += 1)) -lt 3000 ] || { echo "cluster: the keeper $pid never started" >&2; exit 1; }
    sleep 0.01
  done
  echo "$pid"
}
switch=$(keeper)
echo "$switch" >"$dir/switch.pid"
nsenter -t "$switch" -n ip link set lo up
nsenter -t "$switch" -n ip link add br0 type bridge
nsenter -t "$switch" -n ip link set br0 up

for m in "${machines[@]}"; do
  pid=$(keeper)
  echo "$pid" >"$dir/machines/$m.pid"
  # The veth is made inside the switch's namespace, its peer in the machine's.
  nsenter -t "$switch" -n ip link add "v-$m" type veth peer name eth0 netns "$pid"
  nsenter -t "$switch" -n ip link set "v-$m" master br0 up
  nsenter -t "$pid" -n ip link set lo up
  nsenter -t "$pid" -n ip addr add "$(addr_of "$m")/24" dev eth0
  nsenter -t "$pid" -n ip link set eth0 up
  install -d -m 0755 "$dir/local/$m"
  cat /proc/sys/kernel/random/uuid >"$dir/machines/$m.boot_id"
  # Its mounts: the shared paths are opened first, then the private
  # directories are laid over, then the shared paths put back in them.
  nsenter -t "$pid" -n -m -u -- bash -s "$m" "$dir" "${shared[@]}" <<'SETUP'
set -euo pipefail
m=$1 dir=$2
shift 2
hostname "$m"
fd=10
declare -A held
for p in "$@"; do
  [ -d "$p" ] || continue
  eval "exec $fd<\"\$p\""
  held[$p]=$fd
  fd=$((fd + 1))
done
for d in /tmp /var/tmp /dev/shm /run; do
  mode=1777
  [ "$d" = /run ] && mode=0755
  mount -t tmpfs -o "mode=$mode,nosuid,nodev" "rt-cluster-$m" "$d"
done
for p in "${!held[@]}"; do
  mkdir -p "$p"
  mount --no-canonicalize --bind "/proc/self/fd/${held[$p]}" "$p"  # the directory held, not the path
done
# The node's local disk, at the same path on every node.
mkdir -p "$dir/node-local"
mount --bind "$dir/local/$m" "$dir/node-local"
mount --bind "$dir/hosts" /etc/hosts
mount --bind "$dir/machines/$m.boot_id" /proc/sys/kernel/random/boot_id
# /sys/class/net of its own network namespace (UCX reads it), without
# remounting /sys (slurmd needs the host's cgroup mount).
mkdir -p /run/rt-cluster-sys
mount -t sysfs "rt-cluster-$m" /run/rt-cluster-sys
mount --bind /run/rt-cluster-sys/class/net /sys/class/net
SETUP
done
chmod 0755 "$dir/local"/*

# munge: its socket is a path, reached from every machine.
start_munge "$dir"
cp "$dir/munge/munged.pid" "$dir/pids/munged.pid"

cpus=4
nodes="node[1-$n]"
[ "$n" = 1 ] && nodes=node1
{
  echo "ClusterName=rtcluster"
  echo "SlurmctldHost=head($net.254)"
  slurm_conf_common "$dir"
  cat <<EOF
SlurmdParameters=config_overrides
PlugStackConfig=$dir/plugstack.conf
SlurmctldPidFile=$dir/logs/slurmctld.pid
SlurmdPidFile=$dir/logs/slurmd-%n.pid
SlurmctldLogFile=$dir/logs/slurmctld.log
SlurmdLogFile=$dir/logs/slurmd-%n.log
EOF
  for i in $(seq "$n"); do echo "NodeName=node$i NodeAddr=$net.$i CPUs=$cpus State=UNKNOWN"; done
  echo "PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4"
} >"$dir/slurm.conf"
# SPANK plugins (root's to write: slurmstepd loads them as root); empty
# until a test suite installs rt's (test/run-all.sh).
: >"$dir/plugstack.conf"
for i in $(seq "$n"); do install -d -m 0755 "$dir/spool/node$i"; done

# The daemons, in the foreground of processes this script records.
nsenter -t "$(keeper_of head)" -n -m -u -- slurmctld -D -i -f "$dir/slurm.conf" >"$dir/logs/slurmctld.out" 2>&1 &
echo $! >"$dir/pids/slurmctld.pid"
for i in $(seq "$n"); do
  nsenter -t "$(keeper_of "node$i")" -n -m -u -- slurmd -D -f "$dir/slurm.conf" -N "node$i" \
    >"$dir/logs/slurmd-node$i.out" 2>&1 &
  echo $! >"$dir/pids/slurmd-node$i.pid"
done
state=""
for _ in $(seq 150); do
  state=$(CLUSTER_DIR=$dir bash "$0" on head sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' ' || true)
  [ "$state" = "idle " ] && break
  sleep 0.1
done
if [ "$state" != "idle " ]; then
  echo "cluster.sh: the nodes did not come up (states: ${state:-none}); logs in $dir/logs" >&2
  tail -n 5 "$dir"/logs/*.log >&2 || true
  stop
  exit 1
fi
# DIR/on, for sudo: root-owned copies, so that nothing the calling user
# can change runs as root; CMD runs as that user.
install -m 0755 "$0" "$dir/cluster.sh"
cat >"$dir/on" <<EOF
#!/bin/bash
# sudo $dir/on NODE CMD...: CMD as the calling user on NODE of this cluster.
set -euo pipefail
[ -n "\${SUDO_USER:-}" ] && [ \$# -ge 2 ] || { echo "usage: sudo $dir/on NODE CMD..." >&2; exit 2; }
node=\$1
shift
CLUSTER_DIR=$dir exec bash $dir/cluster.sh on "\$node" --user "\$SUDO_USER" "\$@"
EOF
chmod 0755 "$dir/on"
echo "CLUSTER_DIR=$dir"
