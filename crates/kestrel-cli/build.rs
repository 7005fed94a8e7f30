//! Code layout of the release binary. The functions that start-up, an idle session and a
//! turn run are listed in `hot-symbols.txt` (made by `bench/kbench/layout.py`); the linker
//! places them first and together, so each of the three processes of a session (TUI,
//! daemon, worker) touches a few MB of code instead of pages all over the 10 MB of text.
//! That is most of the tree's resident memory and of its start-up page faults
//! (bench/RESULTS.md). Names not found in the build are skipped: a stale list costs only
//! layout, never correctness.

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
    if env::var("PROFILE").as_deref() != Ok("release") || !links_with_rust_lld() {
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
    if order.is_file() {
        linker_arg(&format!("--symbol-ordering-file={}", order.display()));
        linker_arg("--no-warn-symbol-ordering");
    }
    // For the layout tool and CI: the map names the function at every address of this build.
    if let Some(map) = env::var_os("KESTREL_LINK_MAP") {
        linker_arg(&format!("-Map={}", PathBuf::from(map).display()));
    }
}

/// One argument for the linker itself. `-Xlinker ARG` rather than `-Wl,ARG`: the compiler
/// driver splits `-Wl,` at commas, and a checkout path may hold one.
fn linker_arg(arg: &str) {
    println!("cargo:rustc-link-arg-bin=kestrel=-Xlinker");
    println!("cargo:rustc-link-arg-bin=kestrel={arg}");
}

/// Whether the binary is linked by the LLD that rustup's Rust ships and uses by default for
/// x86_64-unknown-linux-gnu since 1.90 (it takes an ordering file; GNU ld does not). Not
/// when the user chose another linker (RUSTFLAGS `-C linker=`/`-fuse-ld=`/linker features,
/// a `target.<triple>.linker` setting), with an older rustc, or with a distribution's rustc
/// built without its own LLD (no `gcc-ld/ld.lld` in the sysroot).
fn links_with_rust_lld() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let Ok(target) = env::var("TARGET") else {
        return false;
    };
    target == "x86_64-unknown-linux-gnu"
        && env::var_os("RUSTC_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("fuse-ld")
        && rustc_minor().is_some_and(|minor| minor >= 90)
        && rustc_sysroot().is_some_and(|sysroot| {
            sysroot.join(format!("lib/rustlib/{target}/bin/gcc-ld/ld.lld")).is_file()
        })
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
