#!/bin/bash
# Environment: host passes, image Env applies, launcher variables are protected.
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/b"
cp -a "$IMG" "$T/b/rootfs"
cat >"$T/b/image-config.json" <<'JSON'
{"config":{"Env":["PATH=/usr/bin:/bin","FOO=image","SLURM_JOB_ID=image","OMPI_COMM_WORLD_RANK=9"]}}
JSON
B="$T/b"

out=$(FOO=host HOSTVAR=h "$RT" exec "$B" sh -c 'echo $FOO $HOSTVAR $PATH')
expect_eq "$out" "image h /usr/bin:/bin" "image Env over the host's"
out=$(SLURM_JOB_ID=42 OMPI_COMM_WORLD_RANK=3 "$RT" exec "$B" sh -c 'echo $SLURM_JOB_ID $OMPI_COMM_WORLD_RANK')
expect_eq "$out" "42 3" "launcher variables are never overwritten by the image"
out=$(env -u SLURM_JOB_ID "$RT" exec "$B" rt-probe env SLURM_JOB_ID)
expect_eq "$out" "image" "the image may set a launcher variable the host lacks"

printf '# comment\nA=file\nB=two words\n' >"$T/env"
out=$("$RT" exec --env-file "$T/env" -e A=cli "$IMG" sh -c 'echo "$A|$B"')
expect_eq "$out" "cli|two words" "--env-file then --env"
out=$(X_1=a X_2=b Y=c "$RT" exec --unset-env 'X_*' "$IMG" sh -c 'echo "${X_1:-none} ${X_2:-none} $Y"')
expect_eq "$out" "none none c" "--unset-env GLOB"
out=$(SECRET=s SLURM_PROCID=1 "$RT" exec --clean-env "$IMG" sh -c 'echo "${SECRET:-none} $SLURM_PROCID $PATH"')
expect_eq "$out" "none 1 /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "--clean-env"

expect_status 125 "malformed --env is refused" -- "$RT" exec -e NOEQUALS "$IMG" true
expect_match "$ERR" "NOEQUALS" "the error names the assignment"
printf 'ok=1\nthis is bad\n' >"$T/bad.env"
expect_status 125 "malformed --env-file is refused" -- "$RT" exec --env-file "$T/bad.env" "$IMG" true
expect_match "$ERR" "bad.env. line 2" "the error names the file and line"
