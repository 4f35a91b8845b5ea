#!/bin/sh
# A manual page from its Markdown source in docs/: the first line "# NAME(SECTION)" becomes
# the page's title, every other heading moves up a level (## NAME -> .SH NAME), and
# go-md2man writes the roff.
#   md2man.sh GO_MD2MAN VERSION IN.md OUT
set -eu
md2man=$1 version=$2 in=$3 out=$4
title=$(sed -n '1s/^# \([a-z0-9-]*\)(\([0-9]\))$/\1 \2/p' "$in")
[ -n "$title" ] || { echo "md2man.sh: $in does not start with '# name(section)'" >&2; exit 1; }
name=${title% *} section=${title#* }
tmp=$out.md
{
  printf '%% %s %s "" "rpcie %s" "rpcie manual"\n\n' "$(echo "$name" | tr a-z A-Z)" "$section" "$version"
  sed '1d; s/^## /# /; s/^### /## /; s/^#### /### /' "$in"
} >"$tmp"
"$md2man" -in "$tmp" -out "$out"
rm -f "$tmp"
