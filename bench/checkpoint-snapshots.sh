#!/usr/bin/env bash
# Snapshot cost on a large synthetic repository (docs/permissions.md, "Checkpoints"):
# 20,000 tracked files, 1,000 untracked ones, a 100 MB untracked file and an ignored
# target/ of 5,000 files. Measures the snapshot of crates/kestrel-tools/src/checkpoint
# (first, second, third; an ignored test in tests/checkpoint_snapshots.rs, in the
# profile given by $PROFILE: "release" or "dev") and, for comparison, what snapshots did
# before 2026-11-30 (`git add --all` into a private index, objects into the user's .git).
# Usage: bench/checkpoint-snapshots.sh [DIR]   (DIR: where to build the repository)
set -euo pipefail
dir=${1:-$(mktemp -d /var/tmp/kestrel-snapbench.XXXXXX)}
repo=$dir/repo
profile=${PROFILE:-dev}
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  python3 - "$repo" <<'PY'
import os, sys
root = sys.argv[1]
line = "fn item() -> usize { 42 } // filler text to make a realistic source line\n"
for d in range(200):
    os.makedirs(f"{root}/src/m{d}", exist_ok=True)
    for f in range(100):
        with open(f"{root}/src/m{d}/f{f}.rs", "w") as out:
            out.write(f"// {d}/{f}\n" + line * 20)
os.makedirs(f"{root}/target/debug", exist_ok=True)
for f in range(5000):
    with open(f"{root}/target/debug/o{f}.o", "w") as out:
        out.write("object\n" * 10)
with open(f"{root}/.gitignore", "w") as out:
    out.write("target/\n")
PY
  git -C "$repo" init -q
  git -C "$repo" add -A
  git -C "$repo" -c user.name=b -c user.email=b@b commit -qm base
  git -C "$repo" gc -q  # as a user's repository mostly is; no auto gc during the runs
  python3 - "$repo" <<'PY'
import os, sys
root = sys.argv[1]
os.makedirs(f"{root}/scratch", exist_ok=True)
for f in range(1000):
    with open(f"{root}/scratch/u{f}.txt", "w") as out:
        out.write(f"untracked {f}\n" * 20)
with open(f"{root}/big.bin", "wb") as out:
    out.write(os.urandom(100 * 1024 * 1024))
PY
fi
echo "repository: $repo ($(git -C "$repo" ls-files | wc -l) tracked files)"
echo ".git before: $(du -sk "$repo/.git" | cut -f1) KiB"

echo "--- now ($profile profile)"
flag=""; [ "$profile" = release ] && flag="--release"
KESTREL_BENCH_REPO=$repo cargo test $flag -q -p kestrel-tools --test checkpoint_snapshots \
  bench_snapshots_of_a_large_repository -- --ignored --nocapture 2>&1 | grep -E "snapshot|store"
echo ".git after: $(du -sk "$repo/.git" | cut -f1) KiB"

echo "--- before (git add --all into a private index, objects into the user's .git)"
cp -a "$repo/.git" "$dir/git-backup"
index=$(mktemp -u /var/tmp/kestrel-snapbench-index.XXXXXX)
for round in first second third; do
  start=$(date +%s%N)
  GIT_INDEX_FILE=$index git -C "$repo" -c core.hooksPath=/dev/null -c core.fsmonitor=false \
    -c core.autocrlf=false -c gc.auto=0 add --all --ignore-errors -- . >/dev/null 2>&1 || true
  GIT_INDEX_FILE=$index git -C "$repo" write-tree >/dev/null
  end=$(date +%s%N)
  echo "$round snapshot: $(( (end - start) / 1000000 )) ms"
done
echo ".git after: $(du -sk "$repo/.git" | cut -f1) KiB"
rm -rf "$repo/.git" "$index"; mv "$dir/git-backup" "$repo/.git"
