#!/bin/bash
# rt build of Apptainer definition files (test/definitions), as the
# unprivileged user, on the Debian image: every section (%arguments with
# --build-arg, %setup on the host, %files with globs and directories, %post
# with $APPTAINER_ENVIRONMENT and $APPTAINER_LABELS, %environment,
# %runscript, %startscript, %labels, %help, %test), then the image run,
# its files where Apptainer's runtime looks, the cache, a failing %test,
# unused build arguments, two stages with %files from, errors naming
# FILE:LINE, Bootstrap: localimage and scratch, and through Apptainer's
# command line a SIF file (read by the SIF reference library where Go is
# here) and a sandbox. Also the front end's refusals: a bare name that is
# both a file here and a stored image, and a -W directory others can write.
. "$(dirname "$0")/lib.sh"
[ -n "${RT_DEBIAN_ROOTFS:-}" ] && [ -r "$RT_DEBIAN_ROOTFS" ] ||
  skip "RT_DEBIAN_ROOTFS is not set (test/run-all.sh builds a Debian root filesystem)"
export RT_STORAGE="$T/store" HOME="$T/home"
mkdir -p "$HOME" "$T/bin" "$T/ctx"
ln -s "$RT" "$T/bin/apptainer"
export PATH="$T/bin:$PATH"
cp "$RT_SOURCE_DIR"/test/definitions/*.def "$T/ctx/"
cd "$T/ctx"
"$RT" import -q "$RT_DEBIAN_ROOTFS" debian
echo data >data.txt
mkdir -p tree/sub glob
echo t >tree/sub/t.txt
echo a >glob/a.conf
echo b >glob/b.conf
echo x >glob/c.txt
echo s >"name with space.txt"

# --- every section -------------------------------------------------------------
expect_status 0 "rt build of a definition file" -- "$RT" build -t feat --build-arg GREETING=hi features.def
expect_match "$ERR" "STEP 1/6: Bootstrap: docker From: debian" "its steps counted and shown (From: substituted)"
expect_match "$ERR" "%setup runs on this host as uid $(id -u) \(not as root\)" "%setup says where and as whom it runs"
expect_match "$OUT" "post as uid 0" "%post runs under root emulation"
expect_match "$OUT" "test ran" "%test runs after the build"
expect_eq "$("$RT" exec feat cat /opt/setup/uid)" "$(id -u)" "%setup ran as the user, on the tree"
expect_eq "$("$RT" exec feat cat /opt/data.txt /opt/tree/sub/t.txt /etc/app/a.conf /etc/app/b.conf '/name with space.txt')" \
  "data
t
a
b
s" "%files: a file, a directory into an existing one (as cp -r), a glob into a directory, a quoted name as its own destination"
expect_status 1 "the glob took only what it names" -- "$RT" exec feat test -e /etc/app/c.txt
expect_status 0 "DEST/ is a directory, made for the file" -- "$RT" exec feat test -f /opt/newdir/data.txt
expect_eq "$("$RT" run feat one two)" "args: one two
MYVAR=from-environment POSTVAR=from-post
hi from post" "rt run: the runscript with its arguments, %environment and \$APPTAINER_ENVIRONMENT applied, {{ GREETING }} from --build-arg"
expect_eq "$("$RT" exec feat sh -c 'echo $MYVAR')" "from-environment" "rt exec applies %environment too"
expect_eq "$("$RT" exec feat cat /.singularity.d/runscript.help)" "    Says hello." "%help as runscript.help"
labels=$("$RT" exec feat cat /.singularity.d/labels.json)
python3 - "$labels" <<'PY' || fail "labels.json: $labels"
import json, sys
j = json.loads(sys.argv[1])
assert j["Author"] == "A. Person" and j["Version"] == "1.0" and j["built.by"] == "rt-post", j
PY
pass "%labels and \$APPTAINER_LABELS in /.singularity.d/labels.json"
expect_match "$("$RT" inspect feat)" '"Author": "A. Person"' "%labels in the image config"
expect_match "$("$RT" exec feat cat /.singularity.d/Singularity)" "From: debian" "the definition, as substituted, in the image"
expect_status 1 "the %post labels file is not left in the image" -- "$RT" exec feat test -e /.build.labels
for d in env actions libs; do
  expect_status 0 "/.singularity.d/$d is there for Apptainer's runtime" -- "$RT" exec feat test -d /.singularity.d/$d
done
"$RT" instance start -q feat svc 2>/dev/null || fail "rt instance start of the image (%startscript)"
expect_match "$("$RT" exec instance://svc sh -c 'ls /tmp/started.*')" "/tmp/started" "%startscript runs at instance start"
"$RT" instance stop -q svc

# --- the cache -----------------------------------------------------------------
expect_status 0 "the same build again" -- "$RT" build -t feat --build-arg GREETING=hi features.def
expect_eq "$(grep -c -- '--> cached' <<<"$ERR")" 4 "every step that makes a layer is cached (%test runs again)"
echo changed >data.txt
expect_status 0 "a %files source changed" -- "$RT" build -t feat --build-arg GREETING=hi --notest features.def
expect_eq "$(grep -c -- '--> cached' <<<"$ERR")" 1 "... the step before %files cached, the rest run again"
[[ "$OUT" != *"test ran"* ]] || fail "--notest still ran %test"
pass "--notest skips %test"
expect_eq "$("$RT" exec feat cat /opt/data.txt)" changed "... and the image has the new file"

# --- build arguments -------------------------------------------------------------
expect_status 125 "a --build-arg the file does not use is an error" -- "$RT" build -t x --build-arg NOPE=1 features.def
expect_match "$ERR" "--build-arg NOPE is not used by features.def" "... naming it"
expect_status 0 "... unless --warn-unused-build-args" -- "$RT" build -t x --notest --build-arg NOPE=1 --warn-unused-build-args features.def
expect_match "$ERR" "warning: --build-arg NOPE is not used" "... then a warning"
printf 'GREETING=from-file\n' >args
expect_status 0 "--build-arg-file" -- "$RT" build -t x --notest --build-arg-file args features.def
expect_match "$("$RT" run x)" "from-file from post" "... its values used"

# --- %test failing: nothing stored ------------------------------------------------
sed 's/test ran/test ran"; exit 3; echo "/' features.def >failing.def
expect_status 1 "a failing %test fails the build" -- "$RT" build -t failed failing.def
expect_match "$ERR" "%test failed with status 3" "... with its status"
expect_status 125 "... and nothing is stored" -- "$RT" inspect failed

# --- two stages ---------------------------------------------------------------------
expect_status 0 "a two-stage definition" -- "$RT" build -t multi multistage.def
expect_eq "$("$RT" run multi)" "hello from stage build" "%files from STAGE brings the program"
expect_eq "$("$RT" exec multi cat /opt/shell)" "bash" "%post -c /bin/bash ran bash"
expect_status 1 "... and nothing else of that stage" -- "$RT" exec multi test -e /left-behind

# --- SCIF apps ----------------------------------------------------------------------------
expect_status 0 "SCIF apps (%appfiles, %appinstall, %appenv, %apprun, ...)" -- "$RT" build -t scif scif.def
expect_eq "$("$RT" run scif)" "the image's runscript" "without --app: the image's runscript"
expect_eq "$("$RT" run --app foo scif a b)" "foo runs with a b: fast foo foo-tool
changed" "rt run --app: the app's runscript, its %appenv, its bin/ on PATH, its %appfiles"
expect_eq "$("$RT" exec --app foo scif cat /scif/apps/foo/install.log)" \
  "installed in /scif/apps/foo for foo" "%appinstall ran in the app's root, with SCIF_APPNAME"
expect_eq "$("$RT" exec --app foo scif sh -c 'echo $SCIF_APPROOT $SCIF_APPDATA')" "/scif/apps/foo /scif/data/foo" \
  "rt exec --app sets the app's variables"
expect_eq "$("$RT" run --app bar scif)" "bar runs" "a second app"
expect_match "$("$RT" exec scif cat /scif/apps/foo/scif/labels.json)" '"Maintainer": "someone"' "%applabels"
expect_eq "$("$RT" exec scif cat /scif/apps/foo/scif/runscript.help)" "    foo does things." "%apphelp"
expect_status 0 "apptainer test --app runs the app's %apptest" -- apptainer test --app foo scif
expect_status 125 "an app the image lacks" -- "$RT" run --app nope scif
expect_match "$ERR" "has no app .nope." "... named"
expect_status 125 "an app without %apptest" -- apptainer test --app bar scif
expect_eq "$(apptainer run --app foo scif x | head -1)" "foo runs with x: fast foo foo-tool" "apptainer run --app"

# --- errors ---------------------------------------------------------------------------
printf 'Bootstrap: docker\nFrom: debian\n\n%%pots\n  true\n' >typo.def
expect_status 125 "an unknown section" -- "$RT" build -t x typo.def
expect_match "$ERR" "typo.def:4: unknown section %pots" "... named with its line"
printf 'Bootstrap: yum\nMirrorURL: http://x\n' >yum.def
expect_status 125 "an agent rt has not" -- "$RT" build -t x yum.def
expect_match "$ERR" "yum.def:1: \`Bootstrap: yum\` is not supported" "... named"
: >empty.def
expect_status 125 "an empty file" -- "$RT" build -t x -f empty.def .
expect_match "$ERR" "an empty definition file|cannot read" "... refused"

# --- localimage and scratch --------------------------------------------------------------
"$RT" convert -q feat "$T/feat.sqfs" || fail "rt convert to SquashFS"
printf 'Bootstrap: localimage\nFrom: %s\n\n%%post\n  echo more > /opt/more\n' "$T/feat.sqfs" >local.def
expect_status 0 "Bootstrap: localimage (a SquashFS file)" -- "$RT" build -t local --notest local.def
expect_eq "$("$RT" exec local cat /opt/more /opt/data.txt)" "more
changed" "... built on that file's tree"
printf 'Bootstrap: scratch\n\n%%files\n  data.txt /data\n\n%%labels\n  Kind scratch\n' >scratch.def
expect_status 0 "Bootstrap: scratch with %files only" -- "$RT" build -t scr scratch.def
"$RT" convert -q --to rootfs scr "$T/scr" || fail "rt convert --to rootfs"
expect_eq "$(cat "$T/scr/data")" changed "... the file at the root of an empty image"
expect_status 0 "... with Apptainer's layout" -- test -x "$T/scr/.singularity.d/runscript"

# --- through Apptainer's command line ------------------------------------------------------
expect_status 0 "apptainer build FILE.sif FILE.def" -- apptainer build --build-arg GREETING=sif feat.sif features.def
expect_eq "$(apptainer run feat.sif)" "args: 
MYVAR=from-environment POSTVAR=from-post
sif from post" "apptainer run of the SIF file"
expect_status 125 "the store keeps no name of that build" -- "$RT" inspect apptainer-build-feat-sif
expect_match "$(apptainer inspect feat.sif)" 'Bootstrap: docker' "apptainer inspect shows the definition"
expect_eq "$(apptainer inspect --deffile feat.sif | sed -n 3p)" "From: debian" "apptainer inspect --deffile: the file as substituted"
expect_match "$(apptainer inspect -l feat.sif)" '"built.by": "rt-post"' "apptainer inspect --labels"
expect_eq "$(apptainer inspect --runscript feat.sif | sed -n 3p)" '    echo "args: $*"' "apptainer inspect --runscript"
expect_match "$(apptainer inspect --environment feat.sif)" "=== /.singularity.d/env/90-environment.sh ===
#!/bin/sh" "apptainer inspect --environment: each script after its path"
expect_eq "$(apptainer run-help feat.sif)" "    Says hello." "apptainer run-help"
expect_match "$("$RT" inspect --section test feat)" 'echo "test ran"' "rt inspect --section test of the stored image"
expect_status 1 "a section the image lacks" -- "$RT" inspect --section startscript multi
expect_match "$ERR" "has no startscript" "... said"
if command -v go >/dev/null; then
  GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$T/gocache" GOFLAGS= \
    go build -o "$T/sifread" "$RT_SOURCE_DIR/test/integration/sifread/main.go" || fail "building sifread"
  expect_status 0 "the SIF reference library reads it" -- "$T/sifread" feat.sif
  expect_match "$OUT" 'Def\.FILE [0-9]+ ".*From: debian.*sif from post' \
    "... its definition object is the file as substituted"
  expect_match "$OUT" 'JSON\.Labels [0-9]+ ".*A\. Person.*built\.by' "... its labels object has %labels and %post's"
fi
expect_status 0 "apptainer build --sandbox DIR FILE.def" -- apptainer build --notest --sandbox sandbox features.def
expect_eq "$(cat sandbox/opt/app/msg)" "hello from post" "the root filesystem is at DIR, as Apptainer makes it"
expect_eq "$(apptainer exec sandbox sh -c 'echo $MYVAR')" from-environment "apptainer exec of the sandbox"

# --- the front end's refusals (found by an attack round) ---------------------------------------
mkdir planted && cp -a sandbox/. planted/ 2>/dev/null || true
"$RT" import -q "$RT_DEBIAN_ROOTFS" planted
expect_status 125 "apptainer exec NAME: a file here and a stored image both" -- apptainer exec planted true
expect_match "$ERR" "both a file here and an image in your store" "... refused, naming both"
expect_status 0 "./NAME takes the file" -- apptainer exec ./planted true
mkdir -m 0777 shared
expect_status 125 "-W DIR --contain where others can write DIR" -- apptainer exec -W shared --contain feat.sif true
expect_match "$ERR" "only you can write" "... refused"
mkdir -m 0700 mine
expect_status 0 "-W DIR of the user's own" -- apptainer exec -W mine --contain feat.sif true

# --- a recipe from Debian's archive (the mirror) -----------------------------------------------
if getent hosts deb.debian.org >/dev/null; then
  expect_status 0 "lolcow.def: apt-get in %post" -- "$RT" build -t lolcow lolcow.def
  expect_match "$("$RT" run lolcow)" "\(oo\)" "its runscript: fortune | cowsay, PATH from %environment"
else
  echo "skip: lolcow.def (deb.debian.org does not resolve)"
fi
