# bash completion for rt
_rt() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null; then
    _init_completion || return
  else  # without the bash-completion package
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}
  fi
  local commands="exec run shell instance pull push import build convert stage images inspect verify sign key rm prune overlay site-store login logout doctor"
  local common="-v --verbose -q --quiet --storage -h --help"
  local exec_opts="$common --uid --gid --root -b --bind -w --write --write-tmpfs --overlay --app
    --private-tmp --no-home --home --contain --tmpfs --net --pid --ipc --volume --mount --workdir --rm --cd -e --env --env-file --unset-env --clean-env -n --dry-run
    --join --no-join --mpi --mpi= --gpu --no-gpu --ib --no-ib --fabric --no-glibc-replace --device --no-pull --policy --verify-key --seccomp"
  if [[ $cword -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands --version --help" -- "$cur"))
    return
  fi
  local images instances
  images() {
    local store=${RT_STORAGE:-/var/tmp/$USER.rt}
    [[ -d $store/images ]] && compgen -W "$(ls "$store/images" | tr + /)" -- "$cur"
    [[ -d $store/instances ]] && compgen -W "$(ls "$store/instances" | sed 's|^|instance://|')" -- "$cur"
  }
  instances() {
    local store=${RT_STORAGE:-/var/tmp/$USER.rt}
    [[ -d $store/instances ]] && compgen -W "$(ls "$store/instances")" -- "$cur"
  }
  case $prev in
    -b | --bind | --env-file | --ca-file | --policy | --squash | -f | --file | -o | --output | --build-arg-file | \
      --sign-by-key | --sign-by-sigstore-private-key | --sign-passphrase-file | --passphrase-file | --output-prefix | --verify-key) _filedir; return ;;
    --cd | --storage) _filedir -d; return ;;
    --overlay) _filedir; return ;;
    --device) COMPREPLY=($(compgen -W "nvidia.com/gpu=all" -- "$cur")); return ;;
    --uid | --gid | -e | --env | --unset-env | --platform | -j | --jobs | --max-size | -u | --username | --level | -t | --timeout | --tag | --build-arg | --target | --app | -s | --size | --create-dir) return ;;
    -s | --signal) COMPREPLY=($(compgen -W "TERM INT HUP KILL USR1 USR2 QUIT" -- "$cur")); return ;;
    --compression) COMPREPLY=($(compgen -W "zstd gzip lz4 xz lzo" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "dir sqfs" -- "$cur")); return ;;
  esac
  case ${words[1]} in
    instance)
      if [[ $cword -eq 2 ]]; then
        COMPREPLY=($(compgen -W "start list stop logs --help" -- "$cur"))
        return
      fi
      case ${words[2]} in
        start) if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$exec_opts" -- "$cur")); else COMPREPLY=($(images)); _filedir; fi ;;
        list) COMPREPLY=($(compgen -W "$common --json" -- "$cur")) ;;
        stop) if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common -s --signal -t --timeout -a --all" -- "$cur")); else COMPREPLY=($(instances)); fi ;;
        logs) COMPREPLY=($(instances)) ;;
      esac
      ;;
    exec | run | shell)
      # Past IMAGE the words belong to the container's program.
      local i
      for ((i = 2; i < cword; i++)); do
        case ${words[i]} in
          --uid | --gid | -b | --bind | --cd | -e | --env | --env-file | --unset-env | --storage | --device | --overlay | --app | --policy | --verify-key) ((i++)) ;;
          -*) ;;
          *) _filedir; return ;;
        esac
      done
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$exec_opts" -- "$cur"))
      else
        COMPREPLY=($(images))
        _filedir -d
      fi
      ;;
    pull) COMPREPLY=($(compgen -W "$common --platform --ca-file --insecure --plain-http -j --jobs --if-missing --policy --max-size --squash --format --compression --level" -- "$cur")) ;;
    push)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common --ca-file --insecure --plain-http --compression -j --jobs --sign-by --sign-by-key --sign-by-sigstore-private-key --sign-passphrase-file" -- "$cur"))
      else COMPREPLY=($(images)); _filedir; fi ;;
    stage)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common --clean" -- "$cur")); else COMPREPLY=($(images)); _filedir; fi ;;
    import)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common --max-size --squash --format --compression --level" -- "$cur")); else _filedir; fi ;;
    build)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common -t --tag -f --file --build-arg --build-arg-file --notest --warn-unused-build-args --target --no-cache --from-host --format -o --output --push --sign-by --sign-by-key --sign-by-sigstore-private-key --sign-passphrase-file --policy --secret --ssh" -- "$cur"))
      else _filedir -d; fi ;;
    convert)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common --to --format --compression --level -j --jobs -f --force" -- "$cur"))
      else COMPREPLY=($(images)); _filedir; fi ;;
    images) COMPREPLY=($(compgen -W "$common --json" -- "$cur")) ;;
    inspect)
      if [[ $prev == --section ]]; then COMPREPLY=($(compgen -W "deffile labels runscript startscript test help environment" -- "$cur"))
      elif [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common --section" -- "$cur")); else COMPREPLY=($(images)); fi ;;
    verify)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common -k --key --gpg-home --legacy-insecure" -- "$cur")); else _filedir; fi ;;
    sign)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common -k --key --fingerprint" -- "$cur")); else _filedir; fi ;;
    key)
      if [[ $cword -eq 2 ]]; then COMPREPLY=($(compgen -W "generate" -- "$cur"))
      else COMPREPLY=($(compgen -W "-v --verbose -q --quiet -h --help --output-prefix --passphrase-file" -- "$cur")); fi ;;
    rm)
      if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$common" -- "$cur")); else COMPREPLY=($(images)); fi ;;
    prune) COMPREPLY=($(compgen -W "$common" -- "$cur")) ;;
    site-store)
      if [[ $cword -eq 2 ]]; then COMPREPLY=($(compgen -W "index" -- "$cur"))
      elif [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-v --verbose -q --quiet -h --help" -- "$cur"))
      else _filedir -d; fi ;;
    overlay)
      if [[ $cword -eq 2 ]]; then COMPREPLY=($(compgen -W "create" -- "$cur"))
      elif [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "-v --verbose -q --quiet -h --help -s --size --sparse --create-dir" -- "$cur"))
      else _filedir; fi ;;
    doctor) COMPREPLY=($(compgen -W "$common --json" -- "$cur")) ;;
    login) COMPREPLY=($(compgen -W "$common -u --username --password-stdin --ca-file --insecure --plain-http --no-check" -- "$cur")) ;;
    logout) COMPREPLY=($(compgen -W "$common --all" -- "$cur")) ;;
  esac
}
# _filedir comes with bash-completion; a plain one otherwise.
declare -F _filedir >/dev/null || _filedir() {
  local IFS=$'\n'
  if [[ ${1:-} == -d ]]; then COMPREPLY+=($(compgen -d -- "$cur")); else COMPREPLY+=($(compgen -f -- "$cur")); fi
}
complete -F _rt rt
