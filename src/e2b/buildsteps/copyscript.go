package buildsteps

import (
	"fmt"
	"strconv"
)

// copyPlan is one COPY as the sandbox carries it out. The archive holds
// the SDK's context-relative paths (copy('files', …) uploads files/ and
// what is below it); it is unpacked into a fresh directory, then:
//
//   - a directory src has its contents copied into dest;
//   - a file src is copied to dest, or into it when dest names a
//     directory (a trailing '/', or an existing directory);
//   - any other src is a glob pattern, and each match is copied into
//     dest/.
//
// What is copied is given to owner first, and with a mode its files get
// that mode and its directories the mode plus search permission wherever
// it grants read (0644 gives directories 0755), which keeps them usable.
// Directories the copy creates for dest are given to owner too. The
// archive and the unpacked files are removed whatever happens.
type copyPlan struct {
	archive string // the uploaded archive, in scratch
	scratch string // the runner's scratch directory
	src     string // relative to the context, as the step names it
	dest    string // absolute and clean
	into    bool   // dest named a directory
	owner   string
	mode    string // octal; "" keeps the archive's modes
}

// dirMode is mode for directories: read permission implies search.
func dirMode(mode string) string {
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		return mode // Validate admits only octal; never reached
	}
	return fmt.Sprintf("%04o", m|(m&0o444)>>2)
}

// script is the bash script that carries the plan out as root. Every value
// enters it single-quoted (shQuote) and is used only as "$variable", so no
// name, however odd, is read as shell syntax; a glob src is expanded by
// pathname expansion alone.
func (p copyPlan) script() string {
	into, dmode := "0", ""
	if p.into {
		into = "1"
	}
	if p.mode != "" {
		dmode = dirMode(p.mode)
	}
	vars := fmt.Sprintf("archive=%s scratch=%s src=%s dest=%s into=%s owner=%s fmode=%s dmode=%s\n",
		shQuote(p.archive), shQuote(p.scratch), shQuote(p.src), shQuote(p.dest),
		into, shQuote(p.owner), shQuote(p.mode), shQuote(dmode))
	return vars + mkdirOwnedFunc + copyBody
}

// copyBody does the copy; see copyPlan. tar -x detects gzip by itself.
// own works on "./$1" so that a name starting with '-' is not an option.
// The archive's owners mean nothing here (--no-same-owner); own sets them.
const copyBody = `tmp=$(mktemp -d "$scratch/copy.XXXXXX")
trap 'rm -rf -- "$tmp" "$archive"' EXIT
tar -xf "$archive" -C "$tmp" --no-same-owner
cd "$tmp"
shopt -s nullglob dotglob

own() {
	local min=0
	if [ $# -gt 1 ]; then min=1; fi
	find "./$1" -mindepth "$min" -exec chown -h -- "$owner:" {} +
	if [ -n "$fmode" ]; then
		find "./$1" -mindepth "$min" -type f -exec chmod -- "$fmode" {} +
		find "./$1" -mindepth "$min" -type d -exec chmod -- "$dmode" {} +
	fi
}

if [ -d "$src" ] && [ ! -L "$src" ]; then
	mkdir_owned "$dest"
	own "$src" contents
	# Entry by entry: copying "$src/." would give dest itself src's owner
	# and mode, and dest may be a directory such as / or a home.
	for e in "$src"/*; do
		cp -a -- "$e" "$dest/"
	done
elif [ -e "$src" ] || [ -L "$src" ]; then
	own "$src"
	if [ "$into" = 1 ] || [ -d "$dest" ]; then
		mkdir_owned "$dest"
		cp -a -- "$src" "$dest/"
	else
		parent=${dest%/*}
		mkdir_owned "${parent:-/}"
		cp -a -- "$src" "$dest"
	fi
else
	IFS=
	matches=( $src )
	unset IFS
	if [ ${#matches[@]} -eq 0 ]; then
		printf 'COPY: nothing in the uploaded files matches %s\n' "$src" >&2
		exit 1
	fi
	mkdir_owned "$dest"
	for m in "${matches[@]}"; do
		own "$m"
		cp -a -- "$m" "$dest/"
	done
fi
`
