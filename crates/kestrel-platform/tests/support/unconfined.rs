//! A scratch directory that no sandbox lets commands write, wherever the checkout and
//! the target dir live. Shared by the sandbox tests of kestrel-platform, kestrel-tools
//! and kestrel-cli (included with `#[path]`: one copy of the rule).

use kestrel_platform::SandboxPolicy;
use std::path::PathBuf;

/// A fresh directory outside every path a sandbox leaves writable (`/tmp`, `$TMPDIR`,
/// `/dev/shm`): under Cargo's target tmp dir, unless that lies in one of them (a clone
/// and `CARGO_TARGET_DIR` under `/tmp`), else under `$HOME`, else under `/var/tmp`.
pub fn unconfined_scratch() -> tempfile::TempDir {
    let target = Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let home = std::env::var_os("HOME").map(PathBuf::from);
    [target, home, Some(PathBuf::from("/var/tmp"))]
        .into_iter()
        .flatten()
        .filter(|base| base.is_dir() && !SandboxPolicy::is_scratch(base))
        .find_map(|base| tempfile::Builder::new().prefix(".kestrel-test-").tempdir_in(base).ok())
        .expect("a writable directory outside /tmp, $TMPDIR and /dev/shm ($HOME or /var/tmp)")
}
