//! The workspace (or a granted write's directory) pinned by device and inode.

use std::fs::{self, File};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The workspace directory as it was when the session started (device and inode):
/// the file tools write beneath its path only while the path still names it, not a
/// directory put in its place since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspacePin {
    device: u64,
    inode: u64,
}

impl WorkspacePin {
    /// The directory `workspace` names now, symlinks followed.
    ///
    /// Fails when it cannot be read.
    pub fn of(workspace: &Path) -> io::Result<Self> {
        let metadata = fs::metadata(workspace)?;
        Ok(Self { device: metadata.dev(), inode: metadata.ino() })
    }

    /// The directory `metadata` was read from (without following a symlink).
    pub(crate) fn of_metadata(metadata: &fs::Metadata) -> Self {
        Self { device: metadata.dev(), inode: metadata.ino() }
    }

    /// Whether `directory` is the pinned one.
    pub(super) fn names(&self, directory: &OwnedFd) -> io::Result<bool> {
        let metadata = File::from(directory.try_clone()?).metadata()?;
        Ok(metadata.dev() == self.device && metadata.ino() == self.inode)
    }
}
