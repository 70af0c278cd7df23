#!/bin/bash
# Exit statuses and signals: the program's own, exec'd in place.
. "$(dirname "$0")/lib.sh"

expect_status 42 "the program's exit status" -- "$RT" exec "$IMG" rt-probe exit 42
expect_status 127 "program not found" -- "$RT" exec "$IMG" no-such-program
expect_match "$ERR" "no-such-program" "the error names the program"
cp "$IMG/etc/hosts" "$IMG/bin/notexec"
expect_status 126 "program not executable" -- "$RT" exec "$IMG" /bin/notexec
expect_status 127 "absolute path not found" -- "$RT" exec "$IMG" /nope
expect_status 137 "killed by SIGKILL: 128+9" -- "$RT" exec "$IMG" rt-probe kill 9
expect_status 125 "rt failure before exec" -- "$RT" exec "$T/no-such-image" true

# Exec in place: the launcher's PID is the program's, and signals reach it.
"$RT" exec "$IMG" rt-probe pid 30 >"$T/pid" &
pid=$!
wait_until 30 test -s "$T/pid" || true
expect_eq "$(cat "$T/pid")" "$pid" "the program has rt's PID"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
expect_eq "$rc" 143 "SIGTERM reaches the program"
