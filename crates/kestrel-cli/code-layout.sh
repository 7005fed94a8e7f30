#!/bin/sh
# The workspace's linker (.cargo/config.toml): `cc` with rustc's arguments, unchanged but
# for one. crates/kestrel-cli/build.rs asks for the release binary's code layout with
# `--symbol-ordering-file=<OUT_DIR>/hot-symbols.keys`: a list of function names in which
# every crate hash and back-reference is a `*` (a dependency added to a crate renames every
# function of it and of the crates above it; ThinLTO adds `.llvm.<hash>` to the functions
# it promotes): build.rs's `layout_key`, which the awk below repeats.
# Here, where the objects being linked are known, each key becomes the names these
# objects define for it, and LLD gets an ordering file of real names: a hash lookup,
# where a linker script with wildcards took LLD 25 s per link (bench/README.md).
# Without nm, or with no such argument, it is `cc` alone.
set -eu
keys=
for arg in "$@"; do
  case "$arg" in
    --symbol-ordering-file=*.keys) keys=${arg#--symbol-ordering-file=} ;;
  esac
done
if [ -z "$keys" ]; then
  exec cc "$@"
fi
order=${keys%.keys}.order
objects=$(mktemp)
for arg in "$@"; do
  case "$arg" in
    *.o | *.a | *.rlib) printf '%s\n' "$arg" >>"$objects" ;;
  esac
done
if command -v nm >/dev/null 2>&1; then
  # Defined symbols of every object; nm complains about an rlib's metadata member.
  tr '\n' '\0' <"$objects" | xargs -0 nm --defined-only --format=just-symbols 2>/dev/null \
    | awk -v keys="$keys" '
      { key = $0; sub(/\.llvm\..*/, "", key)
        gsub(/Cs[0-9A-Za-z]+_/, "Cs*_", key); gsub(/B[0-9A-Za-z]*_/, "B*_", key)
        names[key] = names[key] $0 "\n" }
      END {
        while ((getline key < keys) > 0) {
          if (key in names) printf "%s", names[key]
          # Not in these objects: C code from a static library (no crate hash) keeps its name.
          else if (index(key, "*") == 0) printf "%s\n", key
        }
      }' >"$order" || :
else
  echo "code-layout.sh: no nm (binutils): the release binary is linked without its code layout" >&2
  : >"$order"
fi
rm -f "$objects"
first=1
for arg in "$@"; do
  if [ "$first" = 1 ]; then
    set --
    first=0
  fi
  case "$arg" in
    --symbol-ordering-file=*.keys) set -- "$@" "--symbol-ordering-file=$order" ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec cc "$@" -Xlinker --no-warn-symbol-ordering
