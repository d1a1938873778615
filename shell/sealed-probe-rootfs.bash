# bash completion for sealed-probe-rootfs(8), installed by meson as
# PREFIX/share/bash-completion/completions/sealed-probe-rootfs.  Its commands
# and their options are read from its own --help when completing.

_sealed_probe_rootfs()
{
    local prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} command=${COMP_WORDS[1]}

    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$("$prog" --help 2>/dev/null | sed -n 's/^.*sealed-probe-rootfs \([a-z][a-z]*\)\( .*\)\{0,1\}$/\1/p') --version -V --help -h" -- "$cur"))
        return
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$("$prog" --help 2>/dev/null | sed -n "s/^.*sealed-probe-rootfs $command \(.*\)$/\1/p" \
            | grep -o -- '--[a-z][a-z0-9-]*' | sort -u)" -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _sealed_probe_rootfs sealed-probe-rootfs
