//! The workspace (or a granted write's directory) pinned by device and inode, and what a
//! confined write stays beneath.

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

/// The directory a confined [`Place`](super::Place) stays beneath, and what it is to
/// the session: the refusals name it as the user knows it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Beneath<'a> {
    /// The session's workspace, pinned when the session started (if it was).
    Workspace(&'a Path, Option<WorkspacePin>),
    /// The nearest existing directory of a write granted outside the workspace (approved
    /// or covered by `allow_write`), pinned as the call found it before opening it.
    Granted(&'a Path, WorkspacePin),
}

impl Beneath<'_> {
    pub(super) fn directory(&self) -> &Path {
        match self {
            Beneath::Workspace(directory, _) | Beneath::Granted(directory, _) => directory,
        }
    }

    pub(super) fn pin(&self) -> Option<WorkspacePin> {
        match self {
            Beneath::Workspace(_, pin) => *pin,
            Beneath::Granted(_, pin) => Some(*pin),
        }
    }

    /// `root` (the directory, symlinks resolved) as the messages name it.
    pub(super) fn named(&self, root: &Path) -> String {
        match self {
            Beneath::Workspace(..) => format!("the workspace {}", root.display()),
            Beneath::Granted(..) => format!("{}, the approved write's directory", root.display()),
        }
    }

    /// The refusal when `root` is no longer the pinned directory.
    pub(super) fn changed(&self, root: &Path) -> io::Error {
        let message = match self {
            Beneath::Workspace(..) => format!(
                "the workspace {} is no longer the directory the session started in (it was \
                 moved or replaced)",
                root.display()
            ),
            Beneath::Granted(..) => format!(
                "{} changed after the write was approved (it is no longer the directory that \
                 was checked: moved or replaced); nothing was written",
                root.display()
            ),
        };
        io::Error::new(io::ErrorKind::PermissionDenied, message)
    }
}
