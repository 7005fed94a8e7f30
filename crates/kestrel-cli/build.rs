//! Code layout of the release binary. The functions that start-up, an idle session and a
//! turn run are listed in `hot-symbols.txt` (made by `bench/kbench/layout.py`); the linker
//! places them first and together, so each of the three processes of a session (TUI,
//! daemon, worker) touches a few hundred KB of code instead of pages all over the 10 MB of
//! text. That is most of the tree's resident memory and of its start-up page faults
//! (bench/RESULTS.md). Names not found in the build are skipped: a stale list costs only
//! layout, never correctness.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KESTREL_LINK_MAP");
    let Some(manifest) = env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from) else {
        return;
    };
    let order = manifest.join("hot-symbols.txt");
    println!("cargo:rerun-if-changed={}", order.display());
    if env::var("PROFILE").as_deref() != Ok("release") || !default_linker_is_lld() {
        return;
    }
    if order.is_file() {
        link_arg(&format!("--symbol-ordering-file={}", order.display()));
        link_arg("--no-warn-symbol-ordering");
    }
    // For the layout tool: the map names the function at every address of this build.
    if let Some(map) = env::var_os("KESTREL_LINK_MAP") {
        link_arg(&format!("-Map={}", PathBuf::from(map).display()));
    }
}

fn link_arg(arg: &str) {
    println!("cargo:rustc-link-arg-bin=kestrel=-Wl,{arg}");
}

/// Rust links x86_64-unknown-linux-gnu with its own LLD since 1.90, which takes an
/// ordering file; an older rustc or a linker chosen by the user (RUSTFLAGS `-C linker=`,
/// `-fuse-ld=`, a `target.<triple>.linker` setting) might not, so then nothing is added.
fn default_linker_is_lld() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    env::var("TARGET").as_deref() == Ok("x86_64-unknown-linux-gnu")
        && env::var_os("RUSTC_LINKER").is_none()
        && !flags.contains("linker")
        && !flags.contains("fuse-ld")
        && rustc_minor().is_some_and(|minor| minor >= 90)
}

/// The minor version of the rustc building us (`rustc 1.95.0 (...)` -> 95).
fn rustc_minor() -> Option<u32> {
    let rustc = env::var_os("RUSTC")?;
    let output = Command::new(rustc).arg("--version").output().ok()?;
    let version = String::from_utf8(output.stdout).ok()?;
    let mut parts = version.split_whitespace().nth(1)?.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
