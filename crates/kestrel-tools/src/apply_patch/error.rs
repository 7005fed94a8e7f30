//! Why a patch was not applied. Every message names the file and, for a hunk, which
//! one and the lines it expected, so a model can fix its patch from the text alone.

use std::fmt;

/// What the engine was doing to a file when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    Add,
    Delete,
    Update,
    Move,
    Write,
}

impl fmt::Display for FileAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileAction::Add => "add",
            FileAction::Delete => "delete",
            FileAction::Update => "update",
            FileAction::Move => "move to",
            FileAction::Write => "write",
        })
    }
}

/// A patch that was not applied. Except for [`PatchError::WriteFailed`], nothing
/// was written when one of these is returned.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The text is not a well-formed patch.
    #[error("invalid patch, line {line}: {message}")]
    Syntax { line: usize, message: String },
    /// `*** Begin Patch` and `*** End Patch` with nothing between.
    #[error(
        "the patch changes nothing: it has no `*** Add File`, `*** Delete File` or \
         `*** Update File` section"
    )]
    NoOperations,
    /// The caller's path check refused a path (outside the workspace, read-only mode).
    #[error("refused {path}: {reason}")]
    PathRefused { path: String, reason: String },
    #[error("cannot {action} {path}: no such file")]
    NotFound { path: String, action: FileAction },
    #[error("cannot {action} {path}: it is a directory, not a file")]
    IsDirectory { path: String, action: FileAction },
    #[error("cannot update {path}: it is not UTF-8 text")]
    NotText { path: String },
    /// A hunk of an update did not apply; `hunk` counts from 1 within its file.
    #[error("cannot update {path}, hunk {hunk}: {failure}")]
    Hunk { path: String, hunk: usize, failure: HunkFailure },
    /// Reading a file failed while checking the patch (nothing was written).
    #[error("cannot {action} {path}: {source}")]
    Io {
        path: String,
        action: FileAction,
        #[source]
        source: std::io::Error,
    },
    /// A write failed after others succeeded; `rollback` says whether the files
    /// already changed were put back.
    #[error("writing {path} failed ({source}); {rollback}")]
    WriteFailed {
        path: String,
        #[source]
        source: std::io::Error,
        rollback: String,
    },
}

/// Why a hunk could not be placed in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkFailure {
    /// An `@@ header` line was not found after the previous hunk.
    HeaderNotFound { header: String },
    /// The hunk's context and removed lines are not in the file (after the previous
    /// hunk, at any tolerance). `closest` describes the nearest partial match.
    ContextNotFound { expected: Vec<String>, closest: Option<String> },
    /// The lines occur at several places equally well; `lines` are their 1-based
    /// first lines. The engine never guesses.
    Ambiguous { expected: Vec<String>, lines: Vec<usize> },
}

impl fmt::Display for HunkFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HunkFailure::HeaderNotFound { header } => write!(
                f,
                "the `@@ {header}` line was not found (after the previous hunk); the header \
                 must copy a line of the file"
            ),
            HunkFailure::ContextNotFound { expected, closest } => {
                f.write_str("these lines were not found (after the previous hunk):")?;
                write_lines(f, expected)?;
                if let Some(closest) = closest {
                    write!(f, "\n{closest}")?;
                }
                f.write_str("\nRead the file again and copy its lines exactly.")
            }
            HunkFailure::Ambiguous { expected, lines } => {
                const SHOWN: usize = 10;
                let mut places: Vec<String> =
                    lines.iter().take(SHOWN).map(ToString::to_string).collect();
                if lines.len() > SHOWN {
                    places.push(format!("and {} more", lines.len() - SHOWN));
                }
                write!(f, "these lines occur at lines {} equally well:", places.join(", "))?;
                write_lines(f, expected)?;
                f.write_str(
                    "\nAdd context lines or an `@@ <line before the change>` header so only one \
                     place matches.",
                )
            }
        }
    }
}

fn write_lines(f: &mut fmt::Formatter<'_>, lines: &[String]) -> fmt::Result {
    for line in lines {
        write!(f, "\n    {line}")?;
    }
    Ok(())
}
