#!/bin/bash
# Every option of every subcommand is in its man page, the completions and --help.
set -euo pipefail
: "${RT:?}" "${RT_SOURCE_DIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
n=0
for cmd in exec run shell instance pull push import build convert stage images inspect verify sign key rm prune overlay site-store login logout doctor; do
  page="$RT_SOURCE_DIR/man/rt-$cmd.1"
  [ -f "$page" ] || fail "no man page $page"
  sub=
  [ "$cmd" = overlay ] && sub=create
  [ "$cmd" = key ] && sub=generate
  [ "$cmd" = site-store ] && sub=index
  opts=$("$RT" "$cmd" $sub --help | grep -oE -- '--[a-z][a-z-]*' | sort -u)
  [ -n "$opts" ] || fail "rt $cmd --help lists no options"
  for o in $opts; do
    grep -qF -- "${o//-/\\-}" "$page" || fail "$o missing from $page"
    grep -q -- "$o" "$RT_SOURCE_DIR/completions/rt.bash" || fail "$o missing from completions/rt.bash"
    n=$((n + 1))
  done
done
grep -q "rt-exec" "$RT_SOURCE_DIR/man/rt.1" || fail "rt(1) does not point to rt-exec(1)"

# Every page renders without a warning, with one NAME and one SYNOPSIS, and
# man -l shows it from the checkout (rt-run.1 and rt-shell.1 are links to
# rt-exec.1, not ".so" pages, which need an installed man1/).
pages=0
for page in "$RT_SOURCE_DIR"/man/*.1 "$RT_SOURCE_DIR"/man/*.5; do
  warnings=$(groff -man -ww -z "$page" 2>&1) || fail "groff failed on $page: $warnings"
  [ -z "$warnings" ] || fail "groff warns about $page: $warnings"
  [ "$(grep -c '^\.SH NAME' "$page")" = 1 ] || fail "$page has not one NAME section"
  [ "$(grep -c '^\.SH SYNOPSIS' "$page")" = 1 ] || fail "$page has not one SYNOPSIS section"
  if command -v man >/dev/null; then
    MANWIDTH=80 man -l "$page" 2>&1 | grep -q '^NAME' || fail "man -l $page does not show it"
    # At 80 columns too (a word too long to fit: "cannot adjust line").
    warnings=$(MANWIDTH=80 man -P cat -l "$page" 2>&1 >/dev/null)
    [ -z "$warnings" ] || fail "man -l $page warns at 80 columns: $warnings"
  fi
  pages=$((pages + 1))
done
echo "ok: $pages man pages render without warnings"

# Bash completion works without the bash-completion package too.
complete_words() {  # WORD...: what completing the last word offers
  env -i HOME=/nonexistent bash --norc --noprofile -c '
    . "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _rt
    printf "%s\n" "${COMPREPLY[@]}"' _ "$RT_SOURCE_DIR/completions/rt.bash" "$@"
}
[ "$(complete_words rt ex)" = exec ] || fail "bash completion of commands: [$(complete_words rt ex)]"
complete_words rt exec --no-j | grep -qx -- --no-join || fail "bash completion of exec options"
(cd "$RT_SOURCE_DIR" && complete_words rt import README | grep -qx README.md) || fail "bash completion of files"
[ "$(complete_words rt instance st)" = "$(printf 'start\nstop')" ] || fail "bash completion of instance commands"
echo "ok: bash completion without bash-completion"

# zsh and fish take each command's options from its --help: the commands
# they list must be rt's, and an option must come back for a command.
bin=$(dirname "$RT")
commands="exec run shell instance pull import build convert stage images inspect verify sign rm prune overlay site-store login logout doctor"
for shell in zsh fish; do
  command -v $shell >/dev/null || fail "$shell is missing (test/install-deps.sh installs it)"
done
zsh_words() { PATH="$bin:$PATH" zsh -f -c '. "$1"; shift; _rt_words $# "$@"' _ "$RT_SOURCE_DIR/completions/_rt" "$@"; }
fishhome=$(mktemp -d)
trap 'rm -rf "$fishhome"' EXIT
fish_words() {  # fish keeps state under XDG dirs: a private one, not the user's
  PATH="$bin:$PATH" XDG_CONFIG_HOME="$fishhome" XDG_DATA_HOME="$fishhome" \
    fish --no-config -c "source $RT_SOURCE_DIR/completions/rt.fish; complete -C'$*'"
}
zsh_commands=$(zsh_words rt "")
fish_commands=$(fish_words "rt ")
for c in $commands; do
  grep -qx "$c" <<<"$zsh_commands" || fail "zsh completion lacks the command $c: [$zsh_commands]"
  grep -qx "$c" <<<"$fish_commands" || fail "fish completion lacks the command $c: [$fish_commands]"
done
zsh_words rt exec --no-j | grep -qx -- --no-join || fail "zsh completion of exec options"
[ "$(fish_words rt exec --no-j)" = --no-join ] || fail "fish completion of exec options: [$(fish_words rt exec --no-j)]"
fish_words rt doctor --j | grep -qx -- --json || fail "fish completion of doctor options"
zsh_words rt overlay create --sp | grep -qx -- --sparse || fail "zsh completion of overlay create options"
fish_words rt overlay create --sp | grep -qx -- --sparse || fail "fish completion of overlay create options"
[ "$(complete_words rt overlay cr)" = create ] || fail "bash completion of overlay commands"
[ "$(complete_words rt site-store in)" = index ] || fail "bash completion of site-store commands"
echo "ok: zsh and fish completion"
echo "ok: $n options documented"
