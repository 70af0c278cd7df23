# fish completion for rt. Commands are listed here; each command's options
# come from its own --help, so they are always those of the rt installed.
set -l rt_commands exec run shell instance pull push import build convert stage images inspect verify sign key rm prune overlay site-store login logout doctor

function __rt_options --argument-names cmd
    set -l sub
    test "$cmd" = overlay; and set sub create
    test "$cmd" = key; and set sub generate
    test "$cmd" = site-store; and set sub index
    rt $cmd $sub --help 2>/dev/null | string match -ar -- '--[a-z][a-z-]*' | sort -u
end

function __rt_images
    set -l store $RT_STORAGE
    test -n "$store"; or set store /var/tmp/$USER.rt
    test -d $store/images; and ls $store/images | string replace -a + /
end

function __rt_instances
    set -l store $RT_STORAGE
    test -n "$store"; or set store /var/tmp/$USER.rt
    test -d $store/instances; and ls $store/instances
end

complete -c rt -f
complete -c rt -n "not __fish_seen_subcommand_from $rt_commands" -a "$rt_commands"
complete -c rt -n "not __fish_seen_subcommand_from $rt_commands" -l version -l help
for cmd in $rt_commands
    complete -c rt -n "__fish_seen_subcommand_from $cmd; and string match -q -- '-*' (commandline -ct)" \
        -a "(__rt_options $cmd)"
end
complete -c rt -n "__fish_seen_subcommand_from exec run shell convert push inspect rm; and not string match -q -- '-*' (commandline -ct)" \
    -a "(__rt_images)"
complete -c rt -n "__fish_seen_subcommand_from exec run shell import build convert push verify sign; and not string match -q -- '-*' (commandline -ct)" -F
complete -c rt -n "__fish_seen_subcommand_from instance; and not __fish_seen_subcommand_from start list stop logs" \
    -a "start list stop logs"
complete -c rt -n "__fish_seen_subcommand_from stop logs; and __fish_seen_subcommand_from instance" -a "(__rt_instances)"
complete -c rt -n "__fish_seen_subcommand_from exec run shell; and not string match -q -- '-*' (commandline -ct)" \
    -a "(__rt_instances | string replace -r '^' instance://)"
complete -c rt -n "__fish_seen_subcommand_from overlay; and not __fish_seen_subcommand_from create" -a create
complete -c rt -n "__fish_seen_subcommand_from create; and not string match -q -- '-*' (commandline -ct)" -F
complete -c rt -n "__fish_seen_subcommand_from key; and not __fish_seen_subcommand_from generate" -a generate
complete -c rt -n "__fish_seen_subcommand_from site-store; and not __fish_seen_subcommand_from index" -a index
complete -c rt -n "__fish_seen_subcommand_from index; and not string match -q -- '-*' (commandline -ct)" -a "(__fish_complete_directories)"
