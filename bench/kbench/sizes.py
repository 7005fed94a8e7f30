"""Where the bytes of a binary go, by crate: `python3 bench/kbench/sizes.py BINARY`.

BINARY must keep its symbols. The shipped profile strips them; build the same binary
unstripped without rebuilding the dependencies, in a target dir of its own (the command
writes target/release/kestrel):

    cargo rustc --release -p kestrel-cli --bin kestrel -- -C strip=none

Symbol sizes come from `nm`; a generic function is counted under the crate that defines
it (so `core::ptr::drop_in_place<kestrel_tui::App>` is `core`), as cargo-bloat does.
Sections come from the ELF header (`.eh_frame` and `.gcc_except_table` are the unwind
tables, what `panic = "abort"` would shrink)."""

import collections
import re
import subprocess
import sys


def crate_of(name: str) -> str:
    name = name.lstrip("<&*")
    if name.startswith(("_ZN", "_R")):
        return "(not demangled)"
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return match.group(1) if match else "(C / linker)"


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    sections = subprocess.run(["size", "-A", binary], capture_output=True, text=True, check=True).stdout
    symbols = subprocess.run(["nm", "-S", "--size-sort", "--radix=d", "-C", binary],
                             capture_output=True, text=True, check=True).stdout
    by_crate = collections.Counter()
    for line in symbols.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in "tTrRdDbB":
            by_crate[crate_of(parts[3])] += int(parts[1])
    print("sections (bytes):")
    for line in sections.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].startswith(".") and fields[1].isdigit() and int(fields[1]) > 100_000:
            print(f"  {fields[0]:<22} {int(fields[1]) / 1e6:7.2f} MB")
    total = sum(by_crate.values())
    print(f"symbols by crate ({total / 1e6:.2f} MB in sized symbols):")
    for crate, size in by_crate.most_common(25):
        print(f"  {crate:<32} {size / 1e6:7.2f} MB  {100 * size / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
