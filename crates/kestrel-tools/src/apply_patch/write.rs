//! Writes a checked plan. Each file goes through a temporary file in its own
//! directory that is renamed into place, so a crash never leaves half a file; if a
//! step fails, the steps already done are undone in reverse order.

use super::error::PatchError;
use crate::workspace::WriteScope;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// One file to write (`content`) or remove (`None`), with what was there before.
#[derive(Debug)]
pub(crate) struct Write<'a> {
    pub shown: &'a str,
    pub path: &'a Path,
    pub content: Option<&'a [u8]>,
    pub previous: Option<&'a [u8]>,
    pub permissions: Option<&'a fs::Permissions>,
}

enum Undo<'a> {
    Restore {
        path: PathBuf,
        content: &'a [u8],
        permissions: Option<&'a fs::Permissions>,
    },
    /// A deleted symlink: made again, pointing where it did.
    Relink {
        path: PathBuf,
        target: PathBuf,
    },
    Remove(PathBuf),
    RemoveDirectory(PathBuf),
}

/// Performs the steps in order; on the first failure undoes the earlier ones. Every
/// file and directory is reached within `scope` (through the kernel's confinement,
/// see `Place`), undo steps included.
pub(crate) fn write_all(scope: &WriteScope, steps: &[Write<'_>]) -> Result<(), PatchError> {
    let mut undo = Vec::new();
    for step in steps {
        if let Err(source) = perform(scope, step, &mut undo) {
            let rollback = roll_back(scope, undo);
            return Err(PatchError::WriteFailed { path: step.shown.to_string(), source, rollback });
        }
    }
    Ok(())
}

fn perform<'a>(scope: &WriteScope, step: &Write<'a>, undo: &mut Vec<Undo<'a>>) -> io::Result<()> {
    let Some(content) = step.content else {
        let place = scope.open_entry(step.path)?;
        let is_link = place
            .entry_status()?
            .is_some_and(|status| status.st_mode & libc::S_IFMT == libc::S_IFLNK);
        let link_target = if is_link { Some(place.read_link()?) } else { None };
        place.remove_file()?;
        if let Some(target) = link_target {
            undo.push(Undo::Relink { path: step.path.to_path_buf(), target });
        } else if let Some(previous) = step.previous {
            undo.push(Undo::Restore {
                path: step.path.to_path_buf(),
                content: previous,
                permissions: step.permissions,
            });
        }
        return Ok(());
    };
    // Writing through a symlink updates its target instead of replacing the link.
    let mut created = Vec::new();
    let opened = scope.open(step.path, true, &mut created);
    undo.extend(created.into_iter().map(Undo::RemoveDirectory));
    let place = opened?;
    place.replace(content, mode(step.permissions))?;
    let target = place.path().to_path_buf();
    undo.push(match step.previous {
        Some(previous) => {
            Undo::Restore { path: target, content: previous, permissions: step.permissions }
        }
        None => Undo::Remove(target),
    });
    Ok(())
}

fn mode(permissions: Option<&fs::Permissions>) -> Option<u32> {
    permissions.map(|permissions| permissions.mode() & 0o7777)
}

fn roll_back(scope: &WriteScope, undo: Vec<Undo<'_>>) -> String {
    if undo.is_empty() {
        return "nothing had been changed".to_string();
    }
    let mut failures = Vec::new();
    for step in undo.into_iter().rev() {
        let (path, result) = match step {
            Undo::Restore { path, content, permissions } => {
                let result = scope
                    .open(&path, true, &mut Vec::new())
                    .and_then(|place| place.replace(content, mode(permissions)));
                (path, result)
            }
            Undo::Relink { path, target } => {
                let result = scope.open_entry(&path).and_then(|place| place.make_symlink(&target));
                (path, result)
            }
            Undo::Remove(path) => {
                let result = scope.open_entry(&path).and_then(|place| place.remove_file());
                (path, result)
            }
            Undo::RemoveDirectory(path) => {
                let result = scope.open_entry(&path).and_then(|place| place.remove_directory());
                (path, result)
            }
        };
        if let Err(error) = result {
            failures.push(format!("{} ({error})", path.display()));
        }
    }
    if failures.is_empty() {
        "the files changed before it were restored, so the patch changed nothing".to_string()
    } else {
        format!("restoring failed for {}: check these by hand", failures.join(", "))
    }
}
