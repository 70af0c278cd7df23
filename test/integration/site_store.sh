#!/bin/bash
# The site's read-only image store (store.site): the administrators' index
# (rt site-store index), rt images, rt exec of its SquashFS and SIF files
# after the user's own store, the digest checked once per version of a
# file (the second start reads no more of the file than the program asks:
# the page cache says so), refusals: a changed file, a directory, index or
# file another user could change, a hostile index, rt rm; what a second
# user plants; rt stage of a site image in a real Slurm job (SLURM_CONF).
. "$(dirname "$0")/lib.sh"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || skip "/dev/fuse is not usable by $(id -un) (needs mode 0666)"
command -v fincore >/dev/null || skip "fincore missing (util-linux)"
export RT_STORAGE="$T/store"
own_rt

# The site's images: a SquashFS and a SIF file of the busybox image with a
# marker and 16 MiB no program reads, made with another store (the user's
# own store stays empty).
cp -a "$IMG" "$T/siteimg"
echo site-app >"$T/siteimg/etc/marker"
head -c 16M /dev/urandom >"$T/siteimg/big"
tar -C "$T/siteimg" -cf "$T/siteimg.tar" .
SITE="$T/site"
mkdir -m 0755 "$SITE"
RT_STORAGE="$T/admin-store" "$RT" import -q "$T/siteimg.tar" app
RT_STORAGE="$T/admin-store" "$RT" convert -q app "$SITE/app.sqfs"
RT_STORAGE="$T/admin-store" "$RT" convert -q app "$SITE/tool.sif"
echo "not an image" >"$SITE/README"
ln -s app.sqfs "$SITE/alias.sqfs"
chmod 0644 "$SITE"/*.sqfs "$SITE"/*.sif "$SITE/README"

expect_status 0 "rt site-store index writes the index" -- "$RT" site-store index "$SITE"
expect_match "$OUT" "app  app.sqfs  sqfs  .*sha256:[0-9a-f]{64}" "it lists the SquashFS file"
expect_match "$OUT" "tool  tool.sif  sif  " "and the SIF file"
expect_match "$OUT" "wrote \`$SITE/index.json\`: 2 images" "and says where it wrote them"
expect_match "$ERR" "alias.sqfs\` is a symbolic link: not indexed" "a symlink is left out, said"
expect_eq "$(stat -c %a "$SITE/index.json")" 644 "the index is readable by every user"
index_field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sorted(str([i[f] for f in sys.argv[2:]]) for i in d["images"]))' "$SITE/index.json" "$@"; }
expect_eq "$(index_field name file format)" "[\"['app', 'app.sqfs', 'sqfs']\", \"['tool', 'tool.sif', 'sif']\"]" \
  "the index holds names, files and formats; not the README"
expect_eq "$(index_field name digest size)" \
  "[\"['app', 'sha256:$(sha256sum "$SITE/app.sqfs" | cut -d' ' -f1)', $(stat -c %s "$SITE/app.sqfs")]\", \"['tool', 'sha256:$(sha256sum "$SITE/tool.sif" | cut -d' ' -f1)', $(stat -c %s "$SITE/tool.sif")]\"]" \
  "digests and sizes are sha256sum's and stat's"
[ -z "$(ls -A "$SITE" | grep '^\.')" ] || fail "a temporary file was left beside the index"
pass "no temporary file is left beside the index"

export RT_CONF="$T/rt.conf"
echo "store.site = $T/nowhere $SITE" >"$RT_CONF"

# rt images: the site's images, marked.
expect_status 0 "rt images" -- "$RT" images
expect_match "$OUT" "SOURCE" "rt images has a SOURCE column"
expect_match "$OUT" $'\n'"app +[0-9a-f]{12} .* site $SITE" "it lists the site's SquashFS image, marked as the site's"
expect_match "$OUT" $'\n'"tool +[0-9a-f]{12} .* site $SITE" "and its SIF image"
expect_eq "$("$RT" images --json | python3 -c 'import json,sys; print(sorted((i["name"], i["source"], i["path"]) for i in json.load(sys.stdin)))')" \
  "[('app', 'site', '$SITE/app.sqfs'), ('tool', 'site', '$SITE/tool.sif')]" "rt images --json says their source and file"

# rt exec NAME runs from the site's file; the digest is computed once, then
# remembered in the user's store. The page cache shows what a start read
# of the file: all of it when the digest is computed, then only what the
# program needs (the 16 MiB of /big are never read).
evict() { sync "$1" && python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"; }
cached() { fincore --bytes --noheadings --output RES "$1" | tr -d ' '; }
size=$(stat -c %s "$SITE/app.sqfs")
evict "$SITE/app.sqfs"
[ "$(cached "$SITE/app.sqfs")" -lt $((size / 8)) ] || fail "the file could not be dropped from the page cache"
expect_status 0 "rt exec of a site image" -- "$RT" exec -v app cat /etc/marker
expect_eq "$OUT" site-app "the program runs from the site's SquashFS image"
expect_match "$ERR" "computing the digest of \`$SITE/app.sqfs\`" "the first start computes the file's digest"
expect_match "$ERR" "matches sha256:[0-9a-f]{64} of \`$SITE/index.json\`" "and says it matched the index"
first=$(cached "$SITE/app.sqfs")
[ "$first" -ge $((size * 9 / 10)) ] || fail "the first start read $first of $size bytes"
pass "the first start read the whole file ($first of $size bytes in the page cache)"
expect_eq "$(ls "$RT_STORAGE/verified" | grep -vc '\.lock$')" 1 "a record of the check is kept in the user's store"
evict "$SITE/app.sqfs"
expect_status 0 "rt exec of it again" -- "$RT" exec -v app cat /etc/marker
expect_eq "$OUT" site-app "it runs again"
[[ "$ERR" != *"computing the digest"* ]] || fail "the second start computed the digest again: $ERR"
second=$(cached "$SITE/app.sqfs")
[ "$second" -lt $((size / 4)) ] || fail "the second start read $second of $size bytes"
pass "the second start read only what the program needed ($second of $size bytes)"
rm "$RT_STORAGE"/verified/[0-9a-f]*
expect_status 0 "rt exec with the record removed" -- "$RT" exec -v app true
expect_match "$ERR" "computing the digest" "without its record, the digest is computed again"
expect_eq "$("$RT" exec tool cat /etc/marker)" site-app "the site's SIF image runs"
expect_eq "$("$RT" exec docker.io/library/app:latest cat /etc/marker)" site-app \
  "a site image is found by another form of its name"
mkdir -p "$T/bin"
ln -s "$T/rt" "$T/bin/apptainer"
expect_eq "$(cd "$T" && "$T/bin/apptainer" exec app cat /etc/marker)" site-app "apptainer exec finds it too"
expect_status 0 "rt inspect of a site image" -- "$RT" inspect app
expect_eq "$(echo "$OUT" | python3 -c 'import json,sys; i=json.load(sys.stdin); print(i["source"], i["site"], i["path"], i["digest"] == "sha256:" + sys.argv[1])' \
  "$(sha256sum "$SITE/app.sqfs" | cut -d' ' -f1)")" "site $SITE $SITE/app.sqfs True" "rt inspect shows where it is and its digest"
"$RT" convert -q --to dir app "$T/app-copy"
expect_eq "$(cat "$T/app-copy/rootfs/etc/marker" 2>/dev/null || cat "$T/app-copy/etc/marker")" site-app \
  "rt convert reads a site image by name"

# The user's own image of the name comes first; rt rm removes only that.
cp -a "$IMG" "$T/mine"
echo mine >"$T/mine/etc/marker"
tar -C "$T/mine" -cf "$T/mine.tar" .
"$RT" import -q "$T/mine.tar" app
expect_eq "$("$RT" exec app cat /etc/marker)" mine "the user's own image of the same name wins"
expect_match "$("$RT" images)" $'\n'"app +[0-9a-f]{12} .* store" "rt images lists the user's image as the store's"
expect_status 0 "rt rm of the user's image" -- "$RT" rm app
expect_eq "$("$RT" exec app cat /etc/marker)" site-app "then the site's runs again"
expect_status 125 "rt rm of a site image" -- "$RT" rm app
expect_match "$ERR" "image \`app\` is in the site store \`$SITE\` \(\`$SITE/app.sqfs\`\), which rt never changes" \
  "rt rm refuses, naming the site store and the file"
"$RT" prune -q
[ -f "$SITE/app.sqfs" ] && [ -f "$SITE/index.json" ] || fail "rt prune touched the site store"
pass "rt prune leaves the site store alone"

# A name no index has: the usual error, naming the site store too.
expect_status 125 "a name in no store" -- "$RT" exec --no-pull nothere true
expect_match "$ERR" "image \`nothere\` not found.*nor in the site store \`$T/nowhere\`, \`$SITE\`" \
  "the usual not-found error, naming the site stores"

# A file changed after it was indexed (same size) is refused, named with
# the index and both digests; once it is as indexed again, it runs.
want=$(sha256sum "$SITE/app.sqfs" | cut -d' ' -f1)
last=$(tail -c 1 "$SITE/app.sqfs" | od -An -tx1 | tr -d ' ')
printf 'Z' | dd of="$SITE/app.sqfs" bs=1 seek=$((size - 1)) conv=notrunc status=none
have=$(sha256sum "$SITE/app.sqfs" | cut -d' ' -f1)
expect_status 125 "a site image changed after indexing" -- "$RT" exec app true
expect_match "$ERR" "site image \`app\`: \`$SITE/app.sqfs\` does not match the index \`$SITE/index.json\`" \
  "the refusal names the image, the file and the index"
expect_match "$ERR" "its content is sha256:$have, the index says sha256:$want" "and both digests"
printf "\\x$last" | dd of="$SITE/app.sqfs" bs=1 seek=$((size - 1)) conv=notrunc status=none
expect_eq "$("$RT" exec app cat /etc/marker)" site-app "restored, it is checked again and runs"
echo extra >>"$SITE/tool.sif"
expect_status 125 "a site image that grew" -- "$RT" exec tool true
expect_match "$ERR" "\`$SITE/tool.sif\` does not match the index .*it has [0-9]+ bytes, the index says [0-9]+" \
  "is refused by its size"
"$RT" site-store index -q "$SITE"
expect_eq "$("$RT" exec tool cat /etc/marker)" site-app "indexed again, it runs"

# What another user could change is refused, naming it and why.
chmod o+w "$SITE"
expect_status 125 "a site directory others can write" -- "$RT" exec app true
expect_match "$ERR" "site store \`$SITE\` is not used: \`$SITE\` is writable by other users \(mode 0757\)" \
  "is refused, naming the directory and its mode"
expect_status 0 "rt images with it" -- "$RT" images
expect_match "$ERR" "site store \`$SITE\` is not used" "rt images warns of it"
[[ "$OUT" != *"site $SITE"* ]] || fail "rt images listed the images of a site store it refused: $OUT"
pass "and lists none of its images"
expect_status 125 "the indexer" -- "$RT" site-store index "$SITE"
expect_match "$ERR" "is writable by other users.*every user's rt would refuse it" "rt site-store index refuses it too"
chmod 1777 "$SITE"
expect_status 125 "a sticky site directory others can write" -- "$RT" exec app true
expect_match "$ERR" "\`$SITE\` is writable by other users \(mode 1777\)" "is refused too"
chmod 0755 "$SITE"
chmod 0666 "$SITE/index.json"
expect_status 125 "an index others can write" -- "$RT" exec app true
expect_match "$ERR" "site store \`$SITE\` is not used: \`$SITE/index.json\` is writable by other users \(mode 0666\)" \
  "is refused"
chmod 0644 "$SITE/index.json"
chmod 0664 "$SITE/app.sqfs"
expect_status 125 "an image file its group can write" -- "$RT" exec app true
expect_match "$ERR" "site image \`app\` is not used: \`$SITE/app.sqfs\` is writable by other users \(mode 0664\)" \
  "is refused"
chmod 0644 "$SITE/app.sqfs"

# A hostile index: a file outside the directory, behind a symlink, or in
# a directory reached through one.
cp "$SITE/index.json" "$T/index.good"
set_file() {  # NAME FILE: the index names FILE for NAME
  python3 - "$SITE/index.json" "$1" "$2" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for i in d["images"]:
    if i["name"] == sys.argv[2]:
        i["file"] = sys.argv[3]
json.dump(d, open(sys.argv[1], "w"))
EOF
}
set_file app ../siteimg.tar
expect_status 125 "an index naming a file outside its directory" -- "$RT" exec tool true
expect_match "$ERR" "site store index \`$SITE/index.json\`, entry [0-9]+ \(\`app\`\): file \`../siteimg.tar\` leaves the directory" \
  "is refused, naming the index, the entry and the reason"
cp "$T/index.good" "$SITE/index.json"
set_file app alias.sqfs
expect_status 125 "an index naming a symlink" -- "$RT" exec app true
expect_match "$ERR" "site image \`app\` is not used: \`$SITE/alias.sqfs\` is a symbolic link" "is refused"
mkdir -m 0755 "$T/elsewhere"
cp "$SITE/app.sqfs" "$T/elsewhere/app.sqfs"
ln -s "$T/elsewhere" "$SITE/sub"
cp "$T/index.good" "$SITE/index.json"
set_file app sub/app.sqfs
expect_status 125 "an index naming a file through a symlinked directory" -- "$RT" exec app true
expect_match "$ERR" "\`$SITE/sub\` is a symbolic link" "is refused, even with the same content"
rm "$SITE/sub"
cp "$T/index.good" "$SITE/index.json"
expect_eq "$("$RT" exec app cat /etc/marker)" site-app "the good index works again"

# store.site takes absolute directories only.
echo "store.site = relative/dir" >"$T/rt3.conf"
expect_status 125 "a relative site directory" -- env RT_CONF="$T/rt3.conf" "$RT" exec --no-pull nothere true
expect_match "$ERR" "store.site takes absolute directories, not \`relative/dir\`" "is refused by the configuration's parser"

# Another user on the node ($RT_TEST_SECOND_USER) plants what they can:
# a site store of theirs at a configured path in /tmp, or a symlink there
# to this user's own site store (which they could later point elsewhere).
if [ -n "${RT_TEST_SECOND_USER:-}" ] && sudo -n -u "$RT_TEST_SECOND_USER" true 2>/dev/null; then
  as2() { sudo -n -u "$RT_TEST_SECOND_USER" -- "$@"; }
  planted=/tmp/rt-site-planted.$$ link=/tmp/rt-site-link.$$
  trap 'as2 rm -rf "$planted" "$link"; cleanup' EXIT
  as2 mkdir -m 0755 "$planted"
  as2 sh -c "cat >'$planted/app.sqfs'" <"$T/mine.tar"
  as2 sh -c "cat >'$planted/index.json'" <"$SITE/index.json"
  as2 chmod 0644 "$planted/app.sqfs" "$planted/index.json"
  echo "store.site = $planted" >"$T/rt2.conf"
  expect_status 125 "a site store another user made" -- env RT_CONF="$T/rt2.conf" "$RT" exec app true
  expect_match "$ERR" "site store \`$planted\` is not used: \`$planted\` belongs to uid $(as2 id -u)" \
    "is refused, naming the directory and its owner"
  expect_status 0 "rt images with it" -- env RT_CONF="$T/rt2.conf" "$RT" images
  [[ "$OUT" != *"$planted"* ]] || fail "rt images listed the planted store: $OUT"
  pass "rt images lists nothing of it"
  as2 ln -s "$SITE" "$link"
  echo "store.site = $link" >"$T/rt2.conf"
  expect_status 125 "a symlink another user planted, to this user's site store" -- \
    env RT_CONF="$T/rt2.conf" "$RT" exec app true
  expect_match "$ERR" "site store \`$link\` is not used: \`$link\` lies in \`/tmp\`, a directory other users can write" \
    "is refused: they could point it elsewhere at any time"
  expect_eq "$("$RT" exec app cat /etc/marker)" site-app "the site store named directly still runs"
elif [ "${RT_TEST_REQUIRE_USERNS:-0}" = 1 ]; then
  fail "RT_TEST_SECOND_USER is needed to test what another user plants"
else
  echo "note: no second user: what another user plants is not tested"
fi

# rt stage of a site image in a job of the real single-node Slurm: its
# file (checked against the index) is copied to the node, and the step's
# ranks run that copy.
if [ -n "${SLURM_CONF:-}" ] && command -v salloc >/dev/null; then
  cat >"$T/stage.sh" <<STAGE
$RT stage tool || exit 1
srun -n 1 $RT exec --dry-run tool true >$T/plan.out || exit 1
srun -n 1 $RT exec tool cat /etc/marker >$T/ran.out || exit 1
STAGE
  (cd "$T" && timeout 120 salloc -n 1 bash "$T/stage.sh") >"$T/out" 2>"$T/err" || fail "rt stage in a job: $(cat "$T/err")"
  expect_match "$(cat "$T/err")" "staged \`tool\` .* on every node of job" "rt stage sends a site image"
  expect_match "$(cat "$T/plan.out")" "image root \`$RT_STORAGE/staged/[0-9]+/[0-9a-f]+\.sif\`" \
    "the step's rank runs the node's copy, a SIF file still"
  expect_eq "$(cat "$T/ran.out")" site-app "and reads it"
else
  echo "note: SLURM_CONF not set: rt stage of a site image is not tested (test/run-all.sh starts a Slurm)"
fi
