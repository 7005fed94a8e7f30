#!/usr/bin/env bash
# grep over a generated tree of 100,000 small files (100 directories x 1,000 files):
# the `grep` tool through the registry next to ripgrep / grep -r, via the tools bench.
# The correctness side (it stops at its result cap) is
# crates/kestrel-tools/tests/search_large.rs; this only measures.
#
#   bash bench/grep-100k.sh [--runs N]
set -euo pipefail
cd "$(dirname "$0")/.."
tree="$(mktemp -d "${TMPDIR:-/tmp}/kestrel-grep-100k.XXXXXX")"
trap 'rm -rf "$tree"' EXIT
python3 - "$tree" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(100):
    sub = os.path.join(root, f"d{d:03}")
    os.mkdir(sub)
    for f in range(1000):
        with open(os.path.join(sub, f"f{f:04}.txt"), "w") as out:
            out.write(f"needle {d} {f}\nhay\n" * 4)
PY
cargo bench -p kestrel-tools --bench tools -- --only grep --tree "$tree" "$@"
