//! Reading small files a command or a repository could have planted something else at.

use std::io::Read;
use std::path::Path;

/// The content of `path` if it is a regular file of at most `cap` bytes, opened without
/// following a symlink and without blocking on a FIFO (a `.gitignore`, a `.git` pointer
/// file or an index may be a link to `/dev/zero` or a pipe). `None` for anything else.
#[cfg(unix)]
pub fn read_small_regular(path: &Path, cap: u64) -> Option<Vec<u8>> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC,
    );
    let file = options.open(path).ok()?;
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() > cap {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= cap).then_some(bytes)
}
