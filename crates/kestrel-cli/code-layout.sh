#!/bin/sh
# The workspace's linker (.cargo/config.toml): `cc` (or $KESTREL_LINK_CC) with rustc's
# arguments, unchanged but for one. crates/kestrel-cli/build.rs asks for the release
# binary's code layout with `--symbol-ordering-file=<OUT_DIR>/hot-symbols.keys`: function
# names keyed so that they survive crate hashes changing (build.rs's `layout_key`, which
# the awk below repeats: a dependency added to a crate renames every function of it and of
# the crates above it; ThinLTO adds `.llvm.<hash>` to the functions it promotes; an impl
# block added renumbers the ones after it). Here, where the objects being linked are known,
# each key becomes the names these objects define for it, and LLD gets an ordering file of
# real names: a hash lookup, where a linker script with wildcards took LLD 25 s per link
# (bench/README.md). With no such argument it is `cc` alone.
set -eu
cc=${KESTREL_LINK_CC:-cc}
keys=
for arg in "$@"; do
  case "$arg" in
    --symbol-ordering-file=*.keys) keys=${arg#--symbol-ordering-file=} ;;
  esac
done
if [ -z "$keys" ]; then
  exec "$cc" "$@"
fi
# One file per link: cargo links the binary and its unit-test executable at once with the
# same keys (`--all-targets`, `cargo test --release`).
order=$(mktemp "${keys%.keys}.order.XXXXXX")
# Defined symbols of every object, in POSIX format (name first: `--format=just-symbols`
# needs binutils 2.37); nm complains about an rlib's metadata member. build.rs warns when
# there is no working nm.
for arg in "$@"; do
  case "$arg" in
    *.o | *.a | *.rlib) printf '%s\n' "$arg" ;;
  esac
done | tr '\n' '\0' | xargs -0 nm -P --defined-only 2>/dev/null \
  | KEYS="$keys" awk '
    { key = $1; sub(/\.llvm\..*/, "", key)
      gsub(/Cs[0-9A-Za-z]+_/, "Cs*_", key); gsub(/B[0-9A-Za-z]*_/, "B*_", key)
      gsub(/Ms[0-9A-Za-z]*_/, "M", key); gsub(/Xs[0-9A-Za-z]*_/, "X", key)
      if (!seen[$1]++) names[key] = names[key] $1 "\n" }
    END {
      while ((getline key < ENVIRON["KEYS"]) > 0) {
        if (key in names) printf "%s", names[key]
        # Not in these objects: C code from a static library (no crate hash) keeps its name.
        else if (index(key, "*") == 0) printf "%s\n", key
      }
    }' >"$order" || :
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
status=0
"$cc" "$@" -Xlinker --no-warn-symbol-ordering || status=$?
rm -f "$order"
exit "$status"
