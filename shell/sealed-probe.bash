# bash completion for sealed-probe(1), the agent-side client, installed by
# meson as PREFIX/share/bash-completion/completions/sealed-probe.  The client
# has no --help (it prints one JSON line whatever it is given), so its three
# options are listed here, as sealed-probe(1) lists them; man_options checks
# that page against the strings the binary compares, and install_layout what
# this offers.

_sealed_probe()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}

    COMPREPLY=()
    case $prev in
        --repo|--outcome) return ;;
    esac
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W "--repo --outcome --version" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "--repo --outcome" -- "$cur"))
    fi
}
complete -F _sealed_probe sealed-probe
