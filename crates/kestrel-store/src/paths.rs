//! Where everything lives: `$KESTREL_HOME` (default `~/.kestrel`) and its layout
//! (ARCHITECTURE §7). Directories the store creates are private to the user (0700),
//! files holding sessions are 0600, created with that mode rather than chmod-ed later.

use crate::StoreError;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The root of all of Kestrel's state for one user. One variable relocates it all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KestrelHome {
    root: PathBuf,
}

impl KestrelHome {
    /// `$KESTREL_HOME` if set and non-empty, else `$HOME/.kestrel`. A relative
    /// `$KESTREL_HOME` is made absolute against the current directory, so a process that
    /// changes directory later still finds the same home.
    ///
    /// Fails with [`StoreError::NoHome`] when neither variable is set.
    pub fn from_env() -> Result<Self, StoreError> {
        let root = resolve_root(std::env::var_os("KESTREL_HOME"), std::env::var_os("HOME"))?;
        let root = std::path::absolute(&root)
            .map_err(|source| StoreError::io("resolve the path", &root, source))?;
        Ok(Self { root })
    }

    /// A home at an explicit directory (tests, `--home`-style overrides). Nothing is
    /// created until something is written.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The home directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The user's `config.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// `sessions/`: records under `YYYY/MM/DD/` and the session index.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `sessions/index.jsonl`, the rebuildable list of sessions.
    pub fn index_file(&self) -> PathBuf {
        self.sessions_dir().join("index.jsonl")
    }

    /// `cache/`: things fetched at runtime (the model catalog).
    pub fn cache_dir(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// `checkpoints/`: what each session's calls changed, saved for undo
    /// (`checkpoints/<session>/`).
    pub fn checkpoints_dir(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    /// `run/`: the daemon's socket and pid files.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// `run/worker-<pid>.groups`: the process groups a daemon's worker has running, for
    /// the daemon to kill should the worker die without cleaning up.
    pub fn worker_groups_file(&self, pid: u32) -> PathBuf {
        self.run_dir().join(format!("worker-{pid}.groups"))
    }

    /// `swarm/`: one directory per swarm run.
    pub fn swarm_dir(&self) -> PathBuf {
        self.root.join("swarm")
    }

    /// `swarm/<run>/`: the run's `graph.toml`, `events.jsonl`, `logs/` and `lock`. The id
    /// is not checked here (`SwarmRunDir` does).
    pub fn swarm_run_dir(&self, run: &str) -> PathBuf {
        self.swarm_dir().join(run)
    }

    /// `made-repositories`: the git directories sandboxed commands created (`device
    /// inode path` a line): no session pins one as the workspace's repository.
    pub fn made_repositories_file(&self) -> PathBuf {
        self.root.join("made-repositories")
    }

    /// `logs/`: daemon and worker logs.
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// `commands/`: the user's custom slash commands (`*.md`).
    pub fn commands_dir(&self) -> PathBuf {
        self.root.join("commands")
    }

    /// The user's own `AGENTS.md`, added to every session's instructions.
    pub fn agents_md(&self) -> PathBuf {
        self.root.join("AGENTS.md")
    }

    /// The path relative to the home when it lies inside it (as the index stores it, so
    /// a moved home still works); the path unchanged otherwise.
    pub(crate) fn relative<'a>(&self, path: &'a Path) -> &'a Path {
        path.strip_prefix(&self.root).unwrap_or(path)
    }
}

fn resolve_root(
    kestrel_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, StoreError> {
    if let Some(root) = kestrel_home.filter(|value| !value.is_empty()) {
        return Ok(PathBuf::from(root));
    }
    match home.filter(|value| !value.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".kestrel")),
        None => Err(StoreError::NoHome),
    }
}

/// Creates `path` and any missing parents with mode 0700 (on Unix). Existing
/// directories are left as they are.
///
/// Fails when a component exists as a file or the directory cannot be created.
pub fn ensure_dir(path: &Path) -> Result<(), StoreError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path).map_err(|source| StoreError::io("create the directory", path, source))
}

/// Options for a private file: mode 0600 on Unix, applied when the file is created.
/// The caller adds how it is opened (append, write, create...).
pub(crate) fn private_file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Opens (creating if needed, mode 0600) a shared append-only file such as the index.
pub(crate) fn open_shared_append(path: &Path) -> Result<File, StoreError> {
    private_file_options()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|source| StoreError::io("open for appending", path, source))
}

/// Writes `text` to a fresh private temporary file beside `path`, syncs it and renames it
/// over `path`, so readers see the old file or the new one, never a part.
pub fn replace_file(path: &Path, text: &[u8]) -> std::io::Result<()> {
    // Unique per process and per call, so concurrent writers never share a file.
    static REPLACEMENTS: AtomicU64 = AtomicU64::new(0);
    let serial = REPLACEMENTS.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().map(|name| name.to_string_lossy()).unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.{}.{serial}.tmp", std::process::id()));
    let result = private_file_options()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| file.write_all(text).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&temporary, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kestrel_home_wins_over_home() {
        let root = resolve_root(Some("/k".into()), Some("/h".into())).unwrap();
        assert_eq!(root, PathBuf::from("/k"));
    }

    #[test]
    fn empty_kestrel_home_falls_back_to_dot_kestrel_in_home() {
        let root = resolve_root(Some("".into()), Some("/h".into())).unwrap();
        assert_eq!(root, PathBuf::from("/h/.kestrel"));
        let root = resolve_root(None, Some("/h".into())).unwrap();
        assert_eq!(root, PathBuf::from("/h/.kestrel"));
    }

    #[test]
    fn no_home_at_all_is_an_error_naming_the_variable() {
        let error = resolve_root(None, None).unwrap_err();
        assert!(error.to_string().contains("KESTREL_HOME"), "{error}");
    }

    #[test]
    fn layout_is_under_the_root() {
        let home = KestrelHome::at("/k");
        assert_eq!(home.config_file(), PathBuf::from("/k/config.toml"));
        assert_eq!(home.sessions_dir(), PathBuf::from("/k/sessions"));
        assert_eq!(home.index_file(), PathBuf::from("/k/sessions/index.jsonl"));
        assert_eq!(home.cache_dir(), PathBuf::from("/k/cache"));
        assert_eq!(home.run_dir(), PathBuf::from("/k/run"));
        assert_eq!(home.logs_dir(), PathBuf::from("/k/logs"));
        assert_eq!(home.commands_dir(), PathBuf::from("/k/commands"));
        assert_eq!(home.agents_md(), PathBuf::from("/k/AGENTS.md"));
        assert_eq!(home.swarm_dir(), PathBuf::from("/k/swarm"));
        assert_eq!(home.swarm_run_dir("r1"), PathBuf::from("/k/swarm/r1"));
    }
}
