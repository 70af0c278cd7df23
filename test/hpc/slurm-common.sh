# What the test Slurms (slurm-testbed.sh, one node; cluster.sh, several)
# share; sourced, never run.

# start_munge DIR: munged with a key of its own and its socket under
# DIR/munge (not the system's, if there is one); sets munge_sock.
start_munge() {
  local d=$1/munge
  install -d -m 0755 -o munge -g munge "$d"
  dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none
  chown munge:munge "$d/munge.key"
  chmod 0400 "$d/munge.key"
  munge_sock=$d/munge.socket.2
  runuser -u munge -- munged --socket="$munge_sock" --key-file="$d/munge.key" \
    --pid-file="$d/munged.pid" --log-file="$d/munged.log" --seed-file="$d/munged.seed"
  munge -n -S "$munge_sock" | unmunge -S "$munge_sock" >/dev/null
}

# slurm_conf_common DIR: the slurm.conf lines every test Slurm has: fixed
# ports bound to its own addresses only, munge (start_munge first), no
# cgroups, state and spool under DIR, no accounting.
slurm_conf_common() {
  cat <<CONF
SlurmctldPort=16817
SlurmdPort=16818
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
AuthType=auth/munge
AuthInfo=socket=$munge_sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
StateSaveLocation=$1/state
SlurmdSpoolDir=$1/spool/%n
PlugStackConfig=$1/plugstack.conf
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
CONF
  : >"$1/plugstack.conf"
}
