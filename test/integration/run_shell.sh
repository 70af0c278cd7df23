#!/bin/bash
# rt run (ENTRYPOINT/CMD/WORKDIR) and rt shell.
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/b" && mv "$IMG" "$T/b/rootfs"
mkdir -p "$T/b/rootfs/app"
cat >"$T/b/image-config.json" <<'JSON'
{"config":{"Entrypoint":["/bin/rt-probe"],"Cmd":["argv","from-cmd"],"WorkingDir":"/app","Env":["APPVAR=1"]}}
JSON
out=$("$RT" run "$T/b")
expect_eq "$out" "[from-cmd]" "ENTRYPOINT + CMD"
out=$("$RT" run "$T/b" cwd)
expect_eq "$out" "/app" "arguments replace CMD; WORKDIR applies"
out=$("$RT" run --cd /etc "$T/b" cwd)
expect_eq "$out" "/etc" "--cd overrides WORKDIR"
out=$("$RT" run "$T/b" env APPVAR)
expect_eq "$out" "1" "the image's Env"

echo '{"config":{"Cmd":["echo","hello"]}}' >"$T/b/image-config.json"
out=$("$RT" run "$T/b")
expect_eq "$out" "hello" "CMD alone"
echo '{"config":{}}' >"$T/b/image-config.json"
expect_status 125 "nothing to run" -- "$RT" run "$T/b"
expect_match "$ERR" "no ENTRYPOINT or CMD" "says why"

out=$(echo 'echo in-shell $RT_CONTAINER' | "$RT" shell "$T/b")
expect_eq "$out" "in-shell $T/b" "rt shell reads commands from stdin"
out=$(echo 'echo $SHELL' | SHELL=/bin/zsh "$RT" shell "$T/b")
expect_eq "$out" "/bin/sh" "rt shell sets SHELL to the shell it runs (the image has no zsh)"
expect_status 125 "rt shell takes no command" -- "$RT" shell "$T/b" ls
