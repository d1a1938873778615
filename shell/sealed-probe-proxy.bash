# bash completion for sealed-probe-proxy(8), installed by meson as
# PREFIX/share/bash-completion/completions/sealed-probe-proxy.  The verbs and
# each verb's options are read from the program's own --help when completing,
# so that they cannot drift from it (docs/operations.md, "Shell completion").

_sealed_probe_proxy_verbs()
{
    "$1" --help 2>/dev/null | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p'
}

_sealed_probe_proxy()
{
    local prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local verb=${COMP_WORDS[1]}

    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "$(_sealed_probe_proxy_verbs "$prog") --version -V --help -h" -- "$cur"))
        return
    fi
    if [[ $verb == help ]]; then
        [[ $COMP_CWORD -eq 2 ]] && COMPREPLY=($(compgen -W "$(_sealed_probe_proxy_verbs "$prog")" -- "$cur"))
        return
    fi
    # The values with a fixed set of words; every other value is a path or a number.
    case $prev in
        --snapshot) COMPREPLY=($(compgen -W "overlay copy" -- "$cur")); return ;;
        --release) COMPREPLY=($(compgen -W "bucketed fixed immediate" -- "$cur")); return ;;
        --gvisor-platform) COMPREPLY=($(compgen -W "ptrace systrap kvm" -- "$cur")); return ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$("$prog" "$verb" --help 2>/dev/null | sed -n 's/^  \(--[a-z][a-z0-9-]*\).*/\1/p' | sort -u)" \
            -- "$cur"))
        return
    fi
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -o filenames -F _sealed_probe_proxy sealed-probe-proxy
