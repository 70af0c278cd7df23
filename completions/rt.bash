# bash completion for rt
_rt() {
  local cur prev words cword
  _init_completion || return
  local commands="exec run shell"
  local exec_opts="-v --verbose -q --quiet --uid --gid --root -b --bind -w --write --write-tmpfs
    --private-tmp --no-home --cd -e --env --env-file --unset-env --clean-env -n --dry-run -h --help"
  if [[ $cword -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands --version --help" -- "$cur"))
    return
  fi
  case ${words[1]} in
    exec | run | shell)
      # Past IMAGE the words belong to the container's program.
      local i
      for ((i = 2; i < cword; i++)); do
        case ${words[i]} in
          --uid | --gid | -b | --bind | --cd | -e | --env | --env-file | --unset-env) ((i++)) ;;
          -*) ;;
          *) _filedir; return ;;
        esac
      done
      case $prev in
        -b | --bind | --env-file) _filedir; return ;;
        --cd) _filedir -d; return ;;
        --uid | --gid | -e | --env | --unset-env) return ;;
      esac
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$exec_opts" -- "$cur"))
      else
        _filedir -d
      fi
      ;;
  esac
}
complete -F _rt rt
