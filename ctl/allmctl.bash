# bash completion for allmctl: the commands, and `set`'s keys and words, as
# `allmctl complete` lists them (read off the engine's settings table, so they
# never drift from what `set` accepts). Installed into
# share/bash-completion/completions/allmctl.
_allmctl() {
	local cur=${COMP_WORDS[COMP_CWORD]} cmd="" i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--name | --runtime-dir | --timeout) ((i++)) ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	local words
	words=$("${COMP_WORDS[0]}" complete $cmd 2>/dev/null) || return
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
	[[ $cmd == set && ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
	return 0
}
complete -F _allmctl allmctl
