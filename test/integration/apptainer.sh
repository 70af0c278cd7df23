#!/bin/bash
# rt's Apptainer command line (rt started as apptainer or singularity), as
# the unprivileged user, with the real clients from Debian and the command
# lines of those that are not in Debian:
#   - Snakemake --use-singularity (a shell: and a script: rule) and cwltool
#     --singularity, --user-space-docker-cmd=rt and toil-cwl-runner, each
#     pulling from the local TLS registry (basic auth); outputs checked;
#   - HTCondor's probes and job line (exit_37 in a sandbox directory
#     without /bin/sh, get_user_ns, test, env -i, APPTAINERENV_) and
#     Nextflow's (pull --name, env - PATH=..., --no-home --pid -B);
#   - `singularity exec` habits: -B a,b:c:ro, --cleanenv, --containall,
#     SINGULARITYENV_, --net --network none; refusals name the option.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/registry.sh"
[ -s "${RT_DEBIAN_ROOTFS:-}" ] || skip "RT_DEBIAN_ROOTFS not set (test/run-all.sh builds it with mmdebstrap)"
for c in skopeo gcc; do command -v "$c" >/dev/null || skip "$c missing"; done
export RT_STORAGE="$T/store" HOME="$T/home"
mkdir -p "$HOME" "$T/bin"
ln -s "$RT" "$T/bin/apptainer"
ln -s "$RT" "$T/bin/singularity"
export PATH="$T/bin:$PATH"
cd "$T"

# A Debian bookworm image with python3, in the registry behind a password.
gzip -1 -c "$RT_DEBIAN_ROOTFS" >"$T/deb.tar.gz"
python3 "$RT_SOURCE_DIR/test/integration/ocitool.py" layout "$T/deb" --tag bookworm \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd sleep --cmd 1000 "$T/deb.tar.gz" >/dev/null
start_registry "$T/reg" basic
push "$T/deb:bookworm" "debian:bookworm" "$REG_USER:$REG_PASS"
echo "$REG_PASS" | "$RT_IMAGE" login -q --ca-file "$REG_CA" -u "$REG_USER" --password-stdin "$REG" ||
  fail "rt login to the test registry"
export RT_CA_FILE="$REG_CA"
IMG="docker://$REG/debian:bookworm"

# --- Version, as clients read it ---------------------------------------------
expect_eq "$(apptainer --version)" "apptainer version 1.3.0" "apptainer --version"
expect_match "$(singularity --version)" "^apptainer version [0-9.]+$" "singularity --version (the version last)"
expect_eq "$(singularity version)" "1.3.0" "singularity version"

# --- pull, build, inspect -----------------------------------------------------
singularity pull --name deb.sif "$IMG" 2>"$T/err" || fail "singularity pull --name: $(cat "$T/err")"
expect_eq "$(head -c 30 deb.sif)" "#!/usr/bin/env run-singularity" "the pulled file starts with SIF's launch line"
expect_match "$("$RT_IMAGE" inspect ./deb.sif)" '"format": "SIF"' "pull wrote a SIF file"
expect_status 125 "pull onto an existing file is refused" -- singularity pull --name deb.sif "$IMG"
expect_match "$ERR" "already exists" "and says why"
apptainer pull --force deb.sif "$IMG" 2>/dev/null || fail "pull --force replaces it"
apptainer build --sandbox debdir ./deb.sif 2>/dev/null || fail "build --sandbox from a SIF file"
expect_eq "$(apptainer exec debdir cat /etc/debian_version | cut -d. -f1)" 12 "a sandbox directory runs"
expect_eq "$(ls debdir/etc/debian_version)" debdir/etc/debian_version "--sandbox: the root filesystem at DIR, as Apptainer makes it"

# --- instances: an image without a startscript runs its CMD ---------------------
apptainer instance start deb.sif svc 2>/dev/null || fail "apptainer instance start IMAGE NAME (no command)"
expect_match "$(apptainer instance list)" "svc .*running.*sleep 1000" "the instance runs the image's CMD"
expect_eq "$(apptainer exec instance://svc cat /etc/debian_version | cut -d. -f1)" 12 "exec instance://NAME"
apptainer instance stop svc 2>/dev/null || fail "apptainer instance stop"
[[ "$(apptainer instance list)" != *svc* ]] || fail "the instance is still listed after stop"
pass "apptainer instance stop"

# --- singularity exec habits ---------------------------------------------------
mkdir -p a b c && echo A >a/f && echo B >b/f && echo C >c/f
out=$(singularity exec -B "$T/a,$T/b:/bee,$T/c:/cee:ro" deb.sif sh -c 'cat '"$T"'/a/f /bee/f /cee/f; touch /cee/x 2>/dev/null || echo ro')
expect_eq "$out" $'A\nB\nC\nro' "-B a,b:dst,c:dst:ro"
out=$(FOO=host SINGULARITYENV_BAR=sing APPTAINERENV_BAZ=app singularity exec --cleanenv deb.sif \
  sh -c 'echo "${FOO:-unset} $BAR $BAZ ${SINGULARITYENV_BAR:-gone} $APPTAINER_NAME"')
expect_eq "$out" "unset sing app gone deb.sif" "--cleanenv drops the host's variables; *ENV_X become X"
out=$(singularity exec -e deb.sif sh -c 'echo ${HOME:+home}')
expect_eq "$out" "home" "-e is --cleanenv (HOME stays)"
out=$(singularity exec --containall deb.sif sh -c 'read p _ </proc/self/stat; echo $$ $p; ls -A /tmp | wc -l; pwd; readlink /proc/self/ns/ipc')
expect_eq "$(echo "$out" | sed -n 1p)" "2 2" "--containall: a PID namespace, with its own /proc"
expect_eq "$(echo "$out" | sed -n 2p)" 0 "--containall: an empty /tmp"
expect_eq "$(echo "$out" | sed -n 3p)" "$HOME" "--containall: starts in the (empty) home"
[ "$(echo "$out" | sed -n 4p)" != "$(readlink /proc/self/ns/ipc)" ] || fail "--containall: an IPC namespace"
out=$(apptainer exec --net --network none deb.sif cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ')
expect_eq "$out" "lo" "--net --network none: loopback only"
expect_status 125 "--net alone (a bridge) is refused" -- apptainer exec --net deb.sif true
expect_match "$ERR" "needs root" "with the reason"
if [ ! -e /proc/driver/nvidia/version ]; then
  expect_status 0 "--nv without NVIDIA's driver runs, as Apptainer does" -- apptainer exec --nv deb.sif true
  expect_match "$ERR" "no NVIDIA driver on this host" "with a warning"
fi
expect_match "$(apptainer exec --help)" "apptainer .*COMMAND" "apptainer exec --help"
expect_status 125 "--rocm is refused" -- apptainer exec --rocm deb.sif true
expect_status 125 "--memory is refused" -- apptainer exec --memory 1G deb.sif true
expect_match "$ERR" "cgroup" "with the reason"
expect_status 125 "an unknown option is refused, named" -- apptainer exec --frobnicate deb.sif true
expect_match "$ERR" "unknown option .--frobnicate." "the message names it"
out=$(apptainer exec -f deb.sif sh -c 'id -u; chown 123 /tmp 2>&1 && echo chown-ok')
expect_eq "$(echo "$out" | head -1)" 0 "-f (fakeroot): uid 0 with root emulation"

# --- HTCondor ------------------------------------------------------------------
# Its startd probes with a sandbox directory holding static programs and
# no /bin/sh, then runs each job with the line singularity.cpp builds.
mkdir -p sandbox
printf 'int main(void){return 37;}\n' >exit37.c
printf '#include <stdio.h>\n#include <sys/stat.h>\nint main(void){struct stat s;stat("/proc/self/ns/user",&s);printf("%%lu\\n",(unsigned long)s.st_ino);return 0;}\n' >userns.c
gcc -static -O -o sandbox/exit_37 exit37.c && gcc -static -O -o sandbox/get_user_ns userns.c ||
  skip "gcc -static cannot link (libc6-dev's static libc)"
expect_status 37 "HTCondor's probe: exec -C SANDBOX /exit_37" -- apptainer exec -C "$T/sandbox" /exit_37
inner=$(apptainer exec -C "$T/sandbox" /get_user_ns)
[ -n "$inner" ] && [ "$inner" != "$(stat -L -c %i /proc/self/ns/user)" ] || fail "get_user_ns: $inner"
pass "HTCondor's get_user_ns: another user namespace (no setuid)"
# Without /bin/sh the image's environment scripts cannot be sourced: their
# plain exports apply.
mkdir -p sandbox/.singularity.d/env
printf 'export FROM_SCRIPT="a b"\nexport EXPANDED=$(id)\n' >sandbox/.singularity.d/env/90-environment.sh
cp "$RT_PROBE" sandbox/rt-probe
expect_eq "$(apptainer exec -C "$T/sandbox" /rt-probe env FROM_SCRIPT)" "a b" \
  "an image without /bin/sh gets its environment scripts' plain exports"
expect_eq "$(apptainer exec -C "$T/sandbox" /rt-probe env EXPANDED)" "<unset>" "... and nothing that needs a shell"
exe=$T/execute/dir_1234 && mkdir -p "$exe" && echo payload >"$exe/input"
job=(apptainer -s exec -S /tmp -S /var/tmp -W "$exe" --pwd "$exe" -B "$exe" --home "$exe" -C ./deb.sif
  /bin/sh -c 'echo "$MY_JOB_VAR $(cat input) $HOME $(ls -A /tmp | wc -l)" >output; echo done')
out=$(env -i PATH="$T/bin:/usr/bin:/bin" RT_STORAGE="$RT_STORAGE" APPTAINERENV_MY_JOB_VAR=from-condor \
  APPTAINERENV_PS1='slot1$ ' APPTAINER_CACHEDIR="$exe" "${job[@]}")
expect_eq "$out" "done" "HTCondor's job line runs"
expect_eq "$(cat "$exe/output")" "from-condor payload $exe 0" "the job wrote its output in the execute directory"
test_line=(apptainer -s -q test -S /tmp -S /var/tmp -W "$exe" --pwd "$exe" -B "$exe" --home "$exe" -C ./deb.sif)
expect_status 0 "HTCondor's runTest line (no test script)" -- "${test_line[@]}"

# --- Nextflow ------------------------------------------------------------------
# SingularityCache pulls with --name into its cache; the task runs under
# env - PATH=... with --no-home --pid and the work directory bound.
mkdir -p nxf/cache nxf/work/ab/cdef
singularity pull --name "nxf/cache/$REG-debian-bookworm.img" "$IMG" 2>/dev/null || fail "Nextflow's pull --name"
printf 'echo "task in $(cat /etc/debian_version | cut -d. -f1) as $(id -un)" >.command.out\n' >nxf/work/ab/cdef/.command.sh
(cd nxf/work/ab/cdef && env - PATH="$PATH" ${TMPDIR:+SINGULARITYENV_TMPDIR="$TMPDIR"} \
  SINGULARITYENV_NXF_TASK_WORKDIR="$PWD" singularity exec --no-home --pid -B "$T/nxf/work" \
  "$T/nxf/cache/$REG-debian-bookworm.img" /bin/bash -c "cd $PWD; /bin/bash -ue .command.sh") ||
  fail "Nextflow's task line"
expect_eq "$(cat nxf/work/ab/cdef/.command.out)" "task in 12 as $(id -un)" "Nextflow's task wrote its output"

# --- Snakemake -----------------------------------------------------------------
if command -v snakemake >/dev/null; then
  mkdir -p smk && cd smk
  cat >Snakefile <<EOF
container: "$IMG"
rule all:
    input: "summary.txt"
rule codename:
    output: "codename.txt"
    shell: "grep VERSION_CODENAME /etc/os-release | cut -d= -f2 > {output}"
rule summary:
    input: "codename.txt"
    output: "summary.txt"
    script: "summary.py"
EOF
  cat >summary.py <<'EOF'
import platform
with open(snakemake.input[0]) as f, open(snakemake.output[0], "w") as o:
    o.write(f"{f.read().strip()} python{platform.python_version_tuple()[0]}\n")
EOF
  snakemake --use-singularity --cores 1 --quiet >"$T/smk.log" 2>&1 || fail "snakemake --use-singularity: $(tail -20 "$T/smk.log")"
  expect_eq "$(cat summary.txt)" "bookworm python3" "Snakemake: a shell: and a script: rule in the container"
  ls .snakemake/singularity/*.simg >/dev/null 2>&1 || fail "Snakemake pulled its image with singularity pull"
  pass "Snakemake pulled its image (.snakemake/singularity/*.simg)"
  cd "$T"
else
  [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ] && fail "snakemake missing (test/install-deps.sh installs it)"
  echo "SKIP: snakemake missing"
fi

# --- cwltool and toil ----------------------------------------------------------
if command -v cwltool >/dev/null; then
  mkdir -p cwl && cd cwl
  # A listener on the host's loopback: a container without network cannot reach it.
  port=$(free_port)
  python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(8); time.sleep(600)' \
    "$port" &
  listener=$!
  cat >tool.cwl <<EOF
cwlVersion: v1.2
class: CommandLineTool
requirements:
  DockerRequirement: {dockerPull: "$REG/debian:bookworm"}
  InitialWorkDirRequirement:
    listing: [{entryname: script.sh, entry: "wc -l < \$1 > lines.txt; cat /etc/debian_version | cut -d. -f1 >> lines.txt; python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $port), 2)' 2>/dev/null && echo net-on >> lines.txt || echo net-off >> lines.txt"}]
baseCommand: [sh, script.sh]
inputs:
  infile: {type: File, inputBinding: {position: 1}}
outputs:
  lines: {type: File, outputBinding: {glob: lines.txt}}
EOF
  printf 'one\ntwo\nthree\n' >in.txt
  printf 'infile: {class: File, path: in.txt}\n' >job.yml
  for mode in singularity user-space; do
    # Docker's semantics through rt run: the network stays unless asked off.
    if [ $mode = singularity ]; then want=$'3\n12\nnet-off'; else want=$'3\n12\nnet-on'; fi
    rm -rf "out-$mode" && mkdir "out-$mode"
    if [ $mode = singularity ]; then args=(--singularity); else args=(--user-space-docker-cmd="$RT"); fi
    cwltool --quiet "${args[@]}" --outdir "out-$mode" tool.cwl job.yml >"$T/cwl.log" 2>&1 ||
      fail "cwltool ${args[*]}: $(tail -20 "$T/cwl.log")"
    expect_eq "$(cat "out-$mode/lines.txt")" "$want" "cwltool ${args[0]}: staged input, InitialWorkDir, network as asked"
  done
  if command -v toil-cwl-runner >/dev/null; then
    rm -rf out-toil && mkdir out-toil
    PATH="$T/bin:/usr/bin:/bin" toil-cwl-runner --quiet --singularity --jobStore "file:$T/cwl/jobstore" --outdir out-toil tool.cwl job.yml \
      >"$T/toil.log" 2>&1 || fail "toil-cwl-runner --singularity: $(tail -20 "$T/toil.log")"
    expect_eq "$(cat out-toil/lines.txt)" $'3\n12\nnet-off' "toil-cwl-runner --singularity"
  fi
  kill "$listener"
  cd "$T"
else
  [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ] && fail "cwltool missing (test/install-deps.sh installs it)"
  echo "SKIP: cwltool missing"
fi
