#!/bin/bash
# rt exec: ids, argv, passwd/group, RT_CONTAINER, working directory.
. "$(dirname "$0")/lib.sh"

out=$("$RT" exec "$IMG" rt-probe ids)
expect_eq "$out" "uid=$(id -u) gid=$(id -g) euid=$(id -u) egid=$(id -g)" "caller's ids inside"

out=$("$RT" exec --root "$IMG" rt-probe ids)
expect_eq "$out" "uid=0 gid=0 euid=0 egid=0" "--root maps the caller to 0"

out=$("$RT" exec --uid 4242 --gid 4343 "$IMG" rt-probe ids)
expect_eq "$out" "uid=4242 gid=4343 euid=4242 egid=4343" "--uid/--gid"

out=$("$RT" exec "$IMG" rt-probe argv -l --write -- "a b" '')
expect_eq "$out" "[-l] [--write] [--] [a b] []" "PROG's options and arguments pass untouched"
out=$("$RT" exec -q "$IMG" -- rt-probe argv -v)
expect_eq "$out" "[-v]" "a -- after IMAGE is dropped once"

out=$("$RT" exec "$IMG" sh -c 'grep "^$(id -un):" /etc/passwd')
expect_match "$out" "^$(id -un):x:$(id -u):$(id -g):" "the caller is in /etc/passwd"
out=$("$RT" exec "$IMG" grep -c '^root:' /etc/passwd)
expect_eq "$out" 1 "the image's own entries stay"
out=$("$RT" exec "$IMG" sh -c 'grep ":$(id -g):" /etc/group')
expect_match "$out" "^$(id -gn):x:$(id -g):" "the caller's group is in /etc/group"

out=$("$RT" exec "$IMG" rt-probe env RT_CONTAINER)
expect_eq "$out" "$IMG" "RT_CONTAINER names the image"

mkdir -p "$T/work/sub"
out=$(cd "$T/work/sub" && "$RT" exec "$IMG" rt-probe cwd)
expect_eq "$out" "$T/work/sub" "starts in the caller's working directory"
out=$(cd "$T/work/sub" && "$RT" exec --cd /etc "$IMG" rt-probe cwd)
expect_eq "$out" "/etc" "--cd"

# A bundle (rootfs/ + image-config.json) is an image too.
mkdir -p "$T/bundle"
mv "$IMG" "$T/bundle/rootfs"
echo '{"config":{"Env":["FROM_IMAGE=yes"]}}' >"$T/bundle/image-config.json"
out=$("$RT" exec "$T/bundle" rt-probe env FROM_IMAGE)
expect_eq "$out" "yes" "bundle images get their config's Env"
