#!/usr/bin/env bash
# What `meson install` puts in place (issue 15 points 6 and 7), installed into a staged
# DESTDIR: the manual pages, which `man` then shows; and the client API as a library others
# build on — a shared librpcie with a versioned soname, its public headers and rpcie.pc; a
# program outside the tree (tests/library/edu_client.cc), compiled with nothing
# but `pkg-config --cflags --libs rpcie` against the staged files, attaches an exported edu
# on this host (the provider both pick by default) and drives it: identity, liveness, a
# factorial and its interrupt.
#   install_check.sh SOURCEDIR BUILDDIR
. "$(dirname "$0")/lib.sh"
SRC=$(realpath "$1") B=$(realpath "$2")
for tool in pkg-config c++ readelf; do
  command -v $tool >/dev/null || { [ "${CI:-}" = true ] && die "$tool is not installed (scripts/deps)"; skip "no $tool"; }
done
STAGE=$TMP/stage
meson install -C "$B" --destdir "$STAGE" --no-rebuild --quiet >"$TMP/install.log" 2>&1 ||
  die "meson install into $STAGE: $(tail -5 "$TMP/install.log")"
# The programs and the systemd units.
for p in rpcie-selftest rpcie-bench rpcie rpcie-exportd rpcie-hostd rpcie-edu-driver; do
  [ -x "$STAGE/usr/local/bin/$p" ] || die "not installed: $p"
done
for u in rpcie-exportd rpcie-exportd-unprivileged rpcie-hostd; do
  [ -f "$STAGE/usr/local/lib/systemd/system/$u.service" ] || die "not installed: $u.service"
done
SYSCTL=$STAGE/usr/local/lib/sysctl.d/60-rpcie-hostd.conf
grep -qx "fs.pipe-max-size = 2097152" "$SYSCTL" 2>/dev/null || die "not installed, or without its setting: $SYSCTL"
pass "6 programs, 3 systemd units and hostd's sysctl.d file installed"
# rpcie-k8s-plugin, where gRPC was found (tools/k8s-plugin/meson.build), and its page.
PAGES="rpcie:1 rpcie-run:1 rpcie-bench:1 rpcie-selftest:1 rpcie-edu-driver:1 rpcie-exportd:8 rpcie-hostd:8"
if [ -x "$B/tools/k8s-plugin/rpcie-k8s-plugin" ]; then
  [ -x "$STAGE/usr/local/bin/rpcie-k8s-plugin" ] || die "not installed: rpcie-k8s-plugin"
  [ -f "$STAGE/usr/local/lib/systemd/system/rpcie-k8s-plugin.service" ] || die "not installed: rpcie-k8s-plugin.service"
  PAGES="$PAGES rpcie-k8s-plugin:8"
  pass "rpcie-k8s-plugin and its systemd unit installed"
fi

# Manual pages: one per program, each found and shown by man(1) from the staged tree.
MANDIR=$(find "$STAGE" -type d -path '*/share/man' | head -1)
if [ -z "$MANDIR" ]; then
  skip_check "no manual pages were built (go-md2man is not installed: scripts/deps)"
else
  for page in $PAGES; do
    name=${page%:*} section=${page#*:}
    [ -f "$MANDIR/man$section/$name.$section" ] || die "no $name.$section under $MANDIR/man$section"
    text=$(MANWIDTH=100 man -M "$MANDIR" "$section" "$name" 2>/dev/null) || die "man $section $name failed"
    upper=$(echo "$name" | tr a-z A-Z)
    echo "$text" | head -1 | grep -q "^$upper($section) .*rpcie manual" || die "man $name: header '$(echo "$text" | head -1)'"
    echo "$text" | grep -q "^NAME" && echo "$text" | grep -q "^SYNOPSIS" || die "man $name: no NAME or SYNOPSIS section"
    echo "$text" | grep -A1 "^NAME" | tail -1 | grep -q "^ *$name " || die "man $name: NAME does not name $name"
  done
  pass "$(echo $PAGES | wc -w) manual pages installed under $MANDIR and shown by man (title, NAME, SYNOPSIS)"
fi

# Shell completion: installed where bash-completion looks, and in step with the tool: for
# the tool and each command, the options it completes are exactly those --help lists.
COMPLETION=$(find "$STAGE" -path '*/bash-completion/completions/rpcie')
[ -f "$COMPLETION" ] || die "no bash completion for rpcie under $STAGE"
complete_words() {  # complete_words WORD... : what the completion offers for the last word
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _rpcie; printf "%s\n" "${COMPREPLY[@]}" | sort' \
    _ "$COMPLETION" rpcie "$@"
}
help_options() {  # help_options [COMMAND]: the options rpcie [COMMAND] --help lists
  "$B/tools/rpcie" $1 --help | grep -oE '^  (-[a-zA-Z],)?--[a-z-]+' | tr ',' '\n' | tr -d ' ' | sort
}
for cmd in "" list attach detach status top keygen fabric run; do
  want=$(help_options "$cmd")
  got=$(complete_words $cmd - | grep '^-' | grep -v '^--$')
  [ "$got" = "$want" ] || die "completion of 'rpcie $cmd -' differs from --help: $(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | tr '\n' ' ')"
done
want=$("$B/tools/rpcie" --help | sed -n '/^Subcommands:/,$s/^  \([a-z]*\) .*/\1/p' | sort)
[ "$(complete_words '' | grep -v '^-')" = "$want" ] || die "completed commands differ from --help's: $(complete_words '' | tr '\n' ' ')"
[ "$(complete_words at)" = attach ] || die "'rpcie at' completes to '$(complete_words at)'"
[ "$(complete_words attach --data-path s)" = sealed ] || die "--data-path s completes to '$(complete_words attach --data-path s)'"
[ "$(complete_words -o j)" = json ] || die "-o j completes to '$(complete_words -o j)'"
pass "bash completion installed; each command's completed options match its --help"

PC=$(find "$STAGE" -name rpcie.pc -path '*/pkgconfig/*')
[ "$(echo "$PC" | wc -l)" = 1 ] && [ -n "$PC" ] || die "rpcie.pc installed $(echo "$PC" | grep -c .) times (want once): $PC"
export PKG_CONFIG_PATH=$(dirname "$PC") PKG_CONFIG_SYSROOT_DIR=$STAGE PKG_CONFIG_LIBDIR=
CFLAGS=$(pkg-config --cflags rpcie) && LIBS=$(pkg-config --libs rpcie) || die "pkg-config rpcie failed"
case " $CFLAGS $LIBS " in
  *"$SRC"* | *"$B"*) die "pkg-config points into the source or build tree: $CFLAGS $LIBS" ;;
esac
# The variables as installed (pkg-config prefixes them with the sysroot when it is set).
LIBDIR=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=libdir rpcie)
INCDIR=$(PKG_CONFIG_SYSROOT_DIR= pkg-config --variable=includedir rpcie)
LIB=$(readlink -f "$STAGE$LIBDIR/librpcie.so")
[ -f "$LIB" ] || die "librpcie.so is not installed in $STAGE$LIBDIR"
SONAME=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$SONAME" = librpcie.so.0 ] || die "soname '$SONAME' (want librpcie.so.0)"
[ -L "$STAGE$LIBDIR/librpcie.so.0" ] || die "no librpcie.so.0 link for the loader"
pass "installed: $(basename "$LIB") with soname $SONAME, rpcie.pc, headers under $INCDIR/rpcie"

# Each installed header compiles on its own with what pkg-config gives: none needs the tree.
for h in $(cd "$STAGE$INCDIR" && find rpcie -name '*.hpp' | sort); do
  echo "#include <$h>" | c++ $CFLAGS -x c++ -fsyntax-only - 2>"$TMP/hdr.log" || die "installed $h does not compile alone: $(head -5 "$TMP/hdr.log")"
done
pass "every installed header compiles alone with pkg-config's flags"

c++ $CFLAGS -o "$TMP/edu_client" "$SRC/tests/library/edu_client.cc" $LIBS 2>"$TMP/cc.log" ||
  die "building the program outside the tree: $(head -20 "$TMP/cc.log")"
export LD_LIBRARY_PATH=$STAGE$LIBDIR
RESOLVED=$(ldd "$TMP/edu_client" | sed -n 's/.*librpcie.so.0 => \([^ ]*\).*/\1/p')
[ "$(readlink -f "$RESOLVED")" = "$LIB" ] || die "the program loads librpcie from '$RESOLVED', not the staged $LIB"

"$B/tools/rpcie" keygen "$TMP/psk" >/dev/null || die "keygen"
start_bg "$B/devexport/rpcie-exportd" --listen 127.0.0.1:0 --psk-file "$TMP/psk" --export edu0=edu \
  2>"$TMP/exportd.log"
exportd_port_wait "$TMP/exportd.log" "$LAST_PID"
OUT=$(timeout 30 "$TMP/edu_client" 127.0.0.1 "$PORT" edu0 "$TMP/psk" 2>&1) || die "edu_client: $OUT"
# edu reads back the inverse of the last liveness write; 10! = 3628800; one interrupt.
[ "$OUT" = "liveness 0xedcba987 factorial(10) 3628800 interrupts 1" ] || die "edu_client saw: $OUT"
pass "a program built outside the tree against the staged librpcie drove edu: $OUT"
