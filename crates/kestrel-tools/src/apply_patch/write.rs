//! Writes a checked plan. Each file goes through a temporary file in its own
//! directory that is renamed into place, so a crash never leaves half a file; if a
//! step fails, the steps already done are undone in reverse order.

use super::error::PatchError;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

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
    Restore { path: PathBuf, content: &'a [u8], permissions: Option<&'a fs::Permissions> },
    Remove(PathBuf),
    RemoveDirectory(PathBuf),
}

/// Performs the steps in order; on the first failure undoes the earlier ones.
pub(crate) fn write_all(steps: &[Write<'_>]) -> Result<(), PatchError> {
    let mut undo = Vec::new();
    for step in steps {
        if let Err(source) = perform(step, &mut undo) {
            let rollback = roll_back(undo);
            return Err(PatchError::WriteFailed { path: step.shown.to_string(), source, rollback });
        }
    }
    Ok(())
}

fn perform<'a>(step: &Write<'a>, undo: &mut Vec<Undo<'a>>) -> io::Result<()> {
    let Some(content) = step.content else {
        fs::remove_file(step.path)?;
        if let Some(previous) = step.previous {
            undo.push(Undo::Restore {
                path: step.path.to_path_buf(),
                content: previous,
                permissions: step.permissions,
            });
        }
        return Ok(());
    };
    // Writing through a symlink updates its target instead of replacing the link.
    let target = match fs::symlink_metadata(step.path) {
        Ok(metadata) if metadata.file_type().is_symlink() => {
            fs::canonicalize(step.path).unwrap_or_else(|_| step.path.to_path_buf())
        }
        Ok(_) | Err(_) => step.path.to_path_buf(),
    };
    create_parents(&target, undo)?;
    replace_file(&target, content, step.permissions)?;
    undo.push(match step.previous {
        Some(previous) => {
            Undo::Restore { path: target, content: previous, permissions: step.permissions }
        }
        None => Undo::Remove(target),
    });
    Ok(())
}

fn create_parents(path: &Path, undo: &mut Vec<Undo<'_>>) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut directory = path.parent();
    while let Some(dir) = directory
        && !dir.as_os_str().is_empty()
        && fs::symlink_metadata(dir).is_err()
    {
        missing.push(dir);
        directory = dir.parent();
    }
    for dir in missing.into_iter().rev() {
        match fs::create_dir(dir) {
            Ok(()) => undo.push(Undo::RemoveDirectory(dir.to_path_buf())),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Writes `content` to a fresh temporary file beside `path` and renames it over `path`.
fn replace_file(
    path: &Path,
    content: &[u8],
    permissions: Option<&fs::Permissions>,
) -> io::Result<()> {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let Some(name) = path.file_name() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"));
    };
    let directory = path.parent().unwrap_or(Path::new("."));
    loop {
        let temporary = directory.join(format!(
            ".{}.{}-{}.kestrel-tmp",
            name.to_string_lossy(),
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let mut file = match fs::OpenOptions::new().write(true).create_new(true).open(&temporary) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        };
        let result = file
            .write_all(content)
            .and_then(|()| match permissions {
                Some(permissions) => file.set_permissions(permissions.clone()),
                None => Ok(()),
            })
            .and_then(|()| file.sync_all())
            .and_then(|()| fs::rename(&temporary, path));
        if result.is_err() {
            // Best effort: the temporary file is ours and useless now.
            let _ = fs::remove_file(&temporary);
        }
        return result;
    }
}

fn roll_back(undo: Vec<Undo<'_>>) -> String {
    if undo.is_empty() {
        return "nothing had been changed".to_string();
    }
    let mut failures = Vec::new();
    for step in undo.into_iter().rev() {
        let (path, result) = match step {
            Undo::Restore { path, content, permissions } => {
                let result = replace_file(&path, content, permissions);
                (path, result)
            }
            Undo::Remove(path) => {
                let result = fs::remove_file(&path);
                (path, result)
            }
            Undo::RemoveDirectory(path) => {
                let result = fs::remove_dir(&path);
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
