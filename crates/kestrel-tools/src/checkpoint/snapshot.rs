//! Workspace snapshots as git trees, for calls that may change any file (`shell`, MCP
//! tools). Inside a repository the trees go into the repository's own object store
//! through a private index file (`GIT_INDEX_FILE`), so the user's index, stash list and
//! working tree are never touched; outside one, into a private repository under the
//! session's checkpoint directory. Content is stored byte for byte: no line-ending
//! conversion, no clean filters (`GIT_ATTR_SOURCE` points at the empty tree).
//! Ignored files are not part of a snapshot.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// Git's empty tree: an attribute source with no attributes at all.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
/// Outside a repository, more files than this are not snapshotted.
const MAX_SHADOW_FILES: usize = 50_000;
/// Outside a repository, larger files are left out of the snapshot.
const MAX_SHADOW_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// No git command may hold a call up longer than this.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);

/// One file that differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeChange {
    /// Absolute.
    pub path: PathBuf,
    /// Its entry in the first snapshot; `None` when it did not exist.
    pub before: Option<TreeEntry>,
}

/// A file in a snapshot: git's mode (`100644`, `100755`, `120000`) and blob id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeEntry {
    pub mode: u32,
    pub blob: String,
}

/// Takes and compares snapshots of one workspace.
#[derive(Debug)]
pub(crate) struct Snapshotter {
    git_dir: PathBuf,
    work_tree: PathBuf,
    workspace: PathBuf,
    index: PathBuf,
    /// Pathspecs left out (the checkpoint directory itself, huge files).
    excludes: Vec<String>,
    /// A private repository (the workspace is not in one).
    shadow: bool,
}

impl Snapshotter {
    /// Finds the repository of `workspace`, or makes a private one in `session_dir`.
    ///
    /// Fails when git is missing or the private repository cannot be created.
    pub(crate) async fn open(
        workspace: &Path,
        session_dir: &Path,
        home: &Path,
    ) -> Result<Self, String> {
        let workspace = workspace
            .canonicalize()
            .map_err(|error| format!("{}: {error}", workspace.display()))?;
        let index = session_dir.join("index");
        super::blobs::create_private_dir(session_dir)
            .map_err(|error| format!("{}: {error}", session_dir.display()))?;
        let probe =
            run(clean_git(&workspace).args(["rev-parse", "--absolute-git-dir", "--show-toplevel"]))
                .await;
        let (git_dir, work_tree, shadow) = match probe {
            Ok(output) => {
                let text = String::from_utf8_lossy(&output);
                let mut lines = text.lines();
                match (lines.next(), lines.next()) {
                    (Some(git_dir), Some(top)) => {
                        (PathBuf::from(git_dir), PathBuf::from(top), false)
                    }
                    _ => return Err(format!("unexpected `git rev-parse` output: {text}")),
                }
            }
            Err(_) => {
                let git_dir = session_dir.join("shadow.git");
                if !git_dir.join("HEAD").is_file() {
                    run(clean_git(&workspace)
                        .arg("init")
                        .arg("--quiet")
                        .arg("--bare")
                        .arg(&git_dir))
                    .await?;
                }
                (git_dir, workspace.clone(), true)
            }
        };
        let mut excludes = Vec::new();
        if let Ok(home) = home.canonicalize()
            && let Ok(inside) = home.strip_prefix(&workspace)
        {
            excludes.push(format!(":(exclude,literal){}", inside.display()));
        }
        Ok(Self { git_dir, work_tree, workspace, index, excludes, shadow })
    }

    /// A snapshot of the workspace now: its tree id.
    ///
    /// Fails when git fails, or (outside a repository) the workspace is too big.
    pub(crate) async fn tree(&self) -> Result<String, String> {
        let mut excludes = self.excludes.clone();
        if self.shadow {
            let workspace = self.workspace.clone();
            let large = tokio::task::spawn_blocking(move || large_files(&workspace))
                .await
                .map_err(|error| error.to_string())??;
            excludes.extend(large.into_iter().map(|path| format!(":(exclude,literal){path}")));
        }
        let mut add = self.git();
        add.args(["add", "--all", "--ignore-errors", "--", "."]).args(&excludes);
        // Unreadable files are skipped (and make `add` fail); the tree is still usable.
        let _ = run(&mut add).await;
        let tree = run(self.git().arg("write-tree")).await?;
        Ok(String::from_utf8_lossy(&tree).trim().to_string())
    }

    /// The files that differ between snapshots `before` and `after`.
    pub(crate) async fn changes(
        &self,
        before: &str,
        after: &str,
    ) -> Result<Vec<TreeChange>, String> {
        if before == after {
            return Ok(Vec::new());
        }
        let output = run(self.git().args([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            before,
            after,
            "--",
            ".",
        ]))
        .await?;
        let mut fields = output.split(|byte| *byte == 0).filter(|field| !field.is_empty());
        let mut changes = Vec::new();
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            // ":100644 100755 <old id> <new id> M"
            let meta = String::from_utf8_lossy(meta);
            let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let [old_mode, new_mode, old_id, _new_id, _status] = parts[..] else {
                return Err(format!("unexpected `git diff-tree` output: {meta}"));
            };
            // Submodules (gitlinks) are another repository's business.
            if old_mode == "160000" || new_mode == "160000" {
                continue;
            }
            let before = match u32::from_str_radix(old_mode, 8) {
                Ok(0) => None,
                Ok(mode) => Some(TreeEntry { mode, blob: old_id.to_string() }),
                Err(_) => return Err(format!("unexpected mode `{old_mode}` from git")),
            };
            let path = self.work_tree.join(bytes_to_path(path));
            changes.push(TreeChange { path, before });
        }
        Ok(changes)
    }

    /// The content of a blob of a snapshot.
    pub(crate) async fn blob(&self, id: &str) -> Result<Vec<u8>, String> {
        run(self.git().args(["cat-file", "blob", id])).await
    }

    fn git(&self) -> Command {
        let mut command = clean_git(&self.workspace);
        command
            .args(["-c", "core.autocrlf=false", "-c", "core.safecrlf=false"])
            .args(["-c", "core.fsmonitor=false", "-c", "core.attributesFile=/dev/null"])
            .args(["-c", "gc.auto=0", "-c", "advice.addEmbeddedRepo=false"])
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .env("GIT_INDEX_FILE", &self.index)
            .env("GIT_ATTR_SOURCE", EMPTY_TREE);
        command
    }
}

/// `git` in `dir` with no `GIT_*` variable of ours leaking in.
fn clean_git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            command.env_remove(key);
        }
    }
    // A sandboxed command can write .git/hooks: a snapshot, run unsandboxed, must not
    // run them.
    command.args(["-c", "core.hooksPath=/dev/null"]);
    command
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs a git command; its stdout, or its stderr as the error.
async fn run(command: &mut Command) -> Result<Vec<u8>, String> {
    let output = tokio::time::timeout(GIT_TIMEOUT, command.output())
        .await
        .map_err(|_| "git took too long".to_string())?
        .map_err(|error| format!("cannot run git: {error}"))?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(format!("git failed: {}", String::from_utf8_lossy(&output.stderr).trim()))
    }
}

/// Files over the size cap, relative to `workspace` (ignored files and `.git` left out,
/// as git would). Fails when there are too many files to snapshot at all.
fn large_files(workspace: &Path) -> Result<Vec<String>, String> {
    let mut walker = ignore::WalkBuilder::new(workspace);
    walker
        .hidden(false)
        .require_git(false)
        .git_global(false)
        .follow_links(false)
        .filter_entry(|entry| entry.file_name() != OsStr::new(".git"));
    let mut count = 0;
    let mut large = Vec::new();
    for entry in walker.build().flatten() {
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            continue;
        }
        count += 1;
        if count > MAX_SHADOW_FILES {
            return Err(format!(
                "the workspace has more than {MAX_SHADOW_FILES} files and is not a git repository: \
                 too many to snapshot"
            ));
        }
        if entry.metadata().is_ok_and(|metadata| metadata.len() > MAX_SHADOW_FILE_BYTES)
            && let Ok(relative) = entry.path().strip_prefix(workspace)
        {
            large.push(relative.display().to_string());
        }
    }
    Ok(large)
}

#[cfg(unix)]
fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}
