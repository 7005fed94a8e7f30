//! Code layout of the release binary. The functions that start-up, an idle session and a
//! turn run are listed in `hot-symbols.txt` (made by `bench/kbench/layout.py`); the linker
//! places them first and together, so each of the three processes of a session (TUI,
//! daemon, worker) touches a few MB of code instead of pages all over the 10 MB of text.
//! That is most of the tree's resident memory and of its start-up page faults
//! (bench/RESULTS.md). Names not found in the build are skipped: a stale list costs only
//! layout, never correctness.
//!
//! Names change under the list: ThinLTO renames a function it promotes out of its module
//! `NAME.llvm.<hash>` (the hash changes with any edit of its crate or of code inlined into
//! it, and for dependencies with the CARGO_HOME path), and a dependency added to a crate
//! changes that crate's hash (`Cs<hash>_` in each v0 name) and that of every crate above
//! it. So the list holds `NAME` alone, and this script writes it as keys, every crate
//! hash a `*` ([`layout_key`]), to `OUT_DIR/hot-symbols.keys`, passed to the linker as
//! `--symbol-ordering-file`; the workspace's linker, `code-layout.sh` (.cargo/config.toml),
//! turns the keys into the names the objects being linked define, and LLD orders them.
//! Only when that linker links: another linker (RUSTFLAGS, a config of the user's) gets
//! nothing from here.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KESTREL_LINK_MAP");
    let Some(manifest) = env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) else {
        return;
    };
    let order = manifest.join("hot-symbols.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    // Relink when the linker that resolves the keys changes.
    println!("cargo:rerun-if-changed={}", manifest.join("code-layout.sh").display());
    if env::var("PROFILE").as_deref() != Ok("release") || !links_with_rust_lld(&manifest) {
        return;
    }
    if !env::var("CARGO_ENCODED_RUSTFLAGS")
        .unwrap_or_default()
        .contains("symbol-mangling-version=v0")
    {
        // RUSTFLAGS from the environment replace .cargo/config.toml's: legacy names.
        println!(
            "cargo:warning=built without -C symbol-mangling-version=v0 (RUSTFLAGS set?): \
             hot-symbols.txt names v0 symbols, so the code layout will not apply"
        );
    }
    // code-layout.sh resolves the keys with nm; its own messages are not shown by cargo.
    if !Command::new("nm").arg("--version").output().is_ok_and(|out| out.status.success()) {
        println!(
            "cargo:warning=no working `nm` (binutils) on PATH: the release binary is linked \
             without its code layout (bench/README.md)"
        );
    }
    if let Ok(list) = std::fs::read_to_string(&order)
        && let Some(out_dir) = env::var_os("OUT_DIR")
    {
        let keys = PathBuf::from(out_dir).join("hot-symbols.keys");
        if std::fs::write(&keys, layout_keys(&list)).is_ok() {
            linker_arg(&format!("--symbol-ordering-file={}", keys.display()));
        }
    }
    // For the layout tool and CI: the map names the function at every address of this build.
    if let Some(map) = env::var_os("KESTREL_LINK_MAP") {
        linker_arg(&format!("-Map={}", PathBuf::from(map).display()));
    }
}

/// The list's names as keys ([`layout_key`]), in its order, each once.
fn layout_keys(list: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut keys = String::new();
    for name in list.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let key = layout_key(name);
        if seen.insert(key.clone()) {
            keys.push_str(&key);
            keys.push('\n');
        }
    }
    keys
}

/// A v0 name as a key that survives crate hashes changing: every crate disambiguator
/// (`Cs<base-62 hash>_`, derived by cargo from the crate's version, features and
/// dependencies) a `*`, then every back-reference (`B<base-62 offset>_`, an offset into the
/// name, which moves when a hash before it changes length) too, then every impl block's
/// number (`Ms<n>_`, `Xs<n>_`: blocks are numbered in source order within a module, so one
/// added renumbers those after it) dropped. A dependency added to one crate changes the
/// hash of that crate and of every crate above it, and so the name of every function in
/// them, where what the function is did not change (with every crate's hash changed, 98.4%
/// of the list was found with crate hashes alone, 99.6% with back-references too:
/// bench/RESULTS.md, 2026-12-02). Text of an identifier that looks like one of these only
/// makes the key looser (a few functions share a key), never wrong: both sides are keyed
/// the same way (`code-layout.sh`, `bench/kbench/layout.py`'s `layout_key`).
fn layout_key(name: &str) -> String {
    let name = name.split(".llvm.").next().unwrap_or(name);
    let name = replace_runs(name, "Cs", 1, "Cs*_");
    let name = replace_runs(&name, "B", 0, "B*_");
    let name = replace_runs(&name, "Ms", 0, "M");
    replace_runs(&name, "Xs", 0, "X")
}

/// `name` with every `TAG<at least `least` ASCII letters or digits>_` replaced by `by` (the
/// regex `TAG[0-9A-Za-z]{least,}_`, leftmost first, as awk's gsub and Python's re.sub).
fn replace_runs(name: &str, tag: &str, least: usize, by: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find(tag) {
        let after = &rest[at + tag.len()..];
        let run = after.bytes().take_while(u8::is_ascii_alphanumeric).count();
        if run >= least && after.as_bytes().get(run) == Some(&b'_') {
            out.push_str(&rest[..at]);
            out.push_str(by);
            rest = &after[run + 1..];
        } else {
            out.push_str(&rest[..at + tag.len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// One argument for the linker itself. `-Xlinker ARG` rather than `-Wl,ARG`: the compiler
/// driver splits `-Wl,` at commas, and a checkout path may hold one.
fn linker_arg(arg: &str) {
    println!("cargo:rustc-link-arg-bin=kestrel=-Xlinker");
    println!("cargo:rustc-link-arg-bin=kestrel={arg}");
}

/// Whether the binary is linked by `code-layout.sh` (the workspace's `target.<triple>.linker`)
/// driving the LLD that rustup's Rust ships and uses by default for x86_64-unknown-linux-gnu
/// since 1.90 (it takes an ordering file; GNU ld does not). Not when the user chose another
/// linker (RUSTFLAGS `-C linker=`/`-fuse-ld=`/linker features, a linker setting of their
/// own), with an older rustc, or with a distribution's rustc built without its own LLD (no
/// `gcc-ld/ld.lld` in the sysroot).
fn links_with_rust_lld(manifest: &Path) -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let Ok(target) = env::var("TARGET") else {
        return false;
    };
    target == "x86_64-unknown-linux-gnu"
        && env::var_os("RUSTC_LINKER")
            .is_some_and(|linker| same_file(&linker, &manifest.join("code-layout.sh")))
        && !flags.contains("linker")
        && !flags.contains("fuse-ld")
        && rustc_minor().is_some_and(|minor| minor >= 90)
        && rustc_sysroot().is_some_and(|sysroot| {
            sysroot.join(format!("lib/rustlib/{target}/bin/gcc-ld/ld.lld")).is_file()
        })
}

fn same_file(a: impl AsRef<Path>, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn rustc_output(arg: &str) -> Option<String> {
    let rustc = env::var_os("RUSTC")?;
    let output = Command::new(rustc).arg(arg).output().ok()?;
    if !output.status.success() {
        return None;
    }
    String::from_utf8(output.stdout).ok().map(|text| text.trim().to_owned())
}

/// The minor version of the rustc building us (`rustc 1.95.0 (...)` -> 95).
fn rustc_minor() -> Option<u32> {
    let version = rustc_output("--version")?;
    let mut parts = version.split_whitespace().nth(1)?.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}

fn rustc_sysroot() -> Option<PathBuf> {
    rustc_output("--print=sysroot").map(|sysroot| Path::new(&sysroot).to_path_buf())
}
