//! Whether the git repository a command would run in can make reading git commands run
//! programs. A repository's own config (`.git/config`, a worktree's, a submodule's, a bare
//! repository's `config`) can: `core.fsmonitor` on `status`, `diff.*.textconv` on
//! `diff`/`log -p`/`blame`, `filter.*` on `diff`/`status`, `core.pager`... and so can its
//! `post-index-change` hook, which git runs when `status` or `diff` refresh the index. A
//! workspace may hold such a repository (a bare one, a `.git` planted by an archive or an
//! earlier command), so one that sets any of these is not trusted. The user's global and
//! system config are the user's own choice and are not judged.
//!
//! Every file read here (`.git` files, `commondir`, configs, `.gitmodules`, the index)
//! is opened without following a symlink and without blocking, regular files only and
//! bounded in size; anything else is a risk, so a FIFO or `/dev/zero` can neither hang
//! the check nor pass for "nothing there". git reads the checked bytes, never the path.

use crate::checkpoint::ignores::{MAX_INDEX_BYTES, index_entries};
use crate::workspace::normalize;
use kestrel_platform::read_small_regular;
use kestrel_protocol::WorkspaceRepository;
use kestrel_store::KestrelHome;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A config, `.git` file, `commondir` or `.gitmodules` larger than this is a risk.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// What `git config --list` may print for one file at most.
const MAX_LIST_BYTES: u64 = 16 * 1024 * 1024;
/// How long `git config` may take to read one file.
const GIT_TIMEOUT: Duration = Duration::from_secs(10);
/// The mode of a submodule (a gitlink) in the index.
const GITLINK: u32 = 0o160000;

/// How deep submodules of submodules are followed.
const MAX_SUBMODULE_DEPTH: usize = 3;
/// How many submodules of one repository are checked; more is a risk.
const MAX_SUBMODULES: usize = 256;

/// Hooks that reading commands can fire.
const READING_HOOKS: [&str; 1] = ["post-index-change"];

/// Why the repository that git would find from `dir` is not trusted, if it is not.
pub(crate) fn risk(dir: &Path) -> Option<String> {
    git_environment().or_else(|| risk_at(dir, 0, None))
}

fn git_environment() -> Option<String> {
    ["GIT_DIR", "GIT_COMMON_DIR", "GIT_INDEX_FILE"]
        .iter()
        .any(|name| std::env::var_os(name).is_some())
        .then(|| "GIT_DIR is set, so the repository git uses cannot be checked".into())
}

/// [`risk`] for git run outside the sandbox by a rule: its hooks run too, and its
/// config is read, so a git directory, common directory, hooks directory or hook that
/// the model can change (`can_write`: sandboxed commands or the file tools; husky's
/// `core.hooksPath` into the working tree) is a risk as well.
pub(crate) fn risk_unconfined(dir: &Path, can_write: &dyn Fn(&Path) -> bool) -> Option<String> {
    // One pass: with `can_write` it checks all that [`risk`] does.
    git_environment().or_else(|| risk_at(dir, 0, Some(can_write)))
}

/// The repository git finds from a directory, by the device and inode of its git
/// directory: the workspace's, pinned when the session's line began (its record keeps
/// it), is the only one a git rule lets out of the sandbox (one the model makes, `git
/// init sub`, is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RepositoryPin {
    device: u64,
    inode: u64,
}

impl RepositoryPin {
    /// The repository git would use from `dir` (symlinks resolved, as git's own working
    /// directory is), `None` when there is none or it cannot be told.
    pub(crate) fn of(dir: &Path) -> Option<Self> {
        pinned(dir).map(|pinned| Self { device: pinned.device, inode: pinned.inode })
    }

    /// The pin a record keeps.
    pub(crate) fn of_record(repository: &PinnedRepository) -> Self {
        Self { device: repository.device, inode: repository.inode }
    }
}

/// A repository as a session pins it: where git's directory and its working tree are,
/// and which directory that is (a directory made later at the same path is another).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedRepository {
    pub git_dir: PathBuf,
    /// `None` for a bare repository.
    pub work_tree: Option<PathBuf>,
    pub device: u64,
    pub inode: u64,
}

impl PinnedRepository {
    /// Whether `git_dir` still names the pinned directory.
    pub fn still_there(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(&self.git_dir).is_ok_and(|meta| {
            meta.is_dir() && meta.dev() == self.device && meta.ino() == self.inode
        })
    }

    /// As a record keeps it.
    pub fn from_record(repository: &WorkspaceRepository) -> Option<Self> {
        match repository {
            WorkspaceRepository::None => None,
            WorkspaceRepository::Git { git_dir, work_tree, device, inode } => Some(Self {
                git_dir: PathBuf::from(git_dir),
                work_tree: work_tree.as_ref().map(PathBuf::from),
                device: *device,
                inode: *inode,
            }),
        }
    }

    pub fn to_record(&self) -> WorkspaceRepository {
        WorkspaceRepository::Git {
            git_dir: self.git_dir.display().to_string(),
            work_tree: self.work_tree.as_ref().map(|top| top.display().to_string()),
            device: self.device,
            inode: self.inode,
        }
    }
}

/// The repository git uses from `dir` now, for a new session's record: what a git
/// rule may let out of the sandbox for the whole line of sessions it begins. None when
/// a sandboxed command made it (`home`'s [`note_made`] list): hooks and all are then
/// the model's.
pub fn workspace_repository(dir: &Path, home: &KestrelHome) -> WorkspaceRepository {
    match pinned(dir) {
        Some(pinned) if !made(home, &pinned) => pinned.to_record(),
        Some(_) | None => WorkspaceRepository::None,
    }
}

/// Notes the repositories of `created` (`.git` entries a sandboxed command made) in
/// `home`, so that no later session pins one. Best effort: a list that cannot be
/// written loses only this defence, never a result.
pub fn note_made(home: &KestrelHome, created: &[PathBuf]) {
    use std::io::Write;
    let lines: String = created
        .iter()
        .filter(|path| path.file_name().is_some_and(|name| name == ".git"))
        .filter_map(|path| pinned(path.parent()?))
        .map(|made| format!("{} {} {}\n", made.device, made.inode, made.git_dir.display()))
        .collect();
    if lines.is_empty() {
        return;
    }
    let file =
        std::fs::OpenOptions::new().create(true).append(true).open(home.made_repositories_file());
    if let Ok(mut file) = file {
        let _ = file.write_all(lines.as_bytes());
    }
}

fn made(home: &KestrelHome, repository: &PinnedRepository) -> bool {
    let text = std::fs::read_to_string(home.made_repositories_file()).unwrap_or_default();
    let key = format!("{} {} ", repository.device, repository.inode);
    text.lines().any(|line| line.starts_with(&key))
}

pub(crate) fn pinned(dir: &Path) -> Option<PinnedRepository> {
    use std::os::unix::fs::MetadataExt;
    let real = dir.canonicalize().ok()?;
    let found = find(&real).ok()??;
    let git_dir = found.git_dir.canonicalize().ok()?;
    let metadata = std::fs::metadata(&git_dir).ok()?;
    let work_tree = found.top.and_then(|top| top.canonicalize().ok());
    Some(PinnedRepository { git_dir, work_tree, device: metadata.dev(), inode: metadata.ino() })
}

/// Why the repository git uses for a local remote at `path` is not trusted for git run
/// outside the sandbox by a rule ([`risk_unconfined`]), if it is not: found as git's
/// `enter_repo` finds it, the first of `path/.git`, `path`, `path.git/.git`, `path.git`
/// that is a gitfile (followed) or a git directory (`HEAD`, `objects`, `refs`), and
/// judged exactly there. None found is a risk too: it cannot be checked.
pub(crate) fn local_remote_risk(path: &Path, can_write: &dyn Fn(&Path) -> bool) -> Option<String> {
    // git drops trailing slashes before it tries the suffixes (`..` is left to the OS).
    let path: PathBuf = path.components().collect();
    let Some(found) = enter_repo(&path) else {
        return Some(format!(
            "its remote {} is not a repository that can be checked",
            path.display()
        ));
    };
    if let Some(top) = &found.top
        && can_write(top)
    {
        return Some(format!(
            "its remote's working tree {} is where sandboxed commands or the file tools can write",
            top.display()
        ));
    }
    risk_of(found, 0, Some(can_write))
}

fn enter_repo(path: &Path) -> Option<Found> {
    let with_suffix = |suffix: &str| {
        let mut text = path.as_os_str().to_owned();
        text.push(suffix);
        PathBuf::from(text)
    };
    let is_git_dir = |dir: &Path| {
        dir.join("HEAD").is_file()
            && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
            && dir.join("refs").is_dir()
    };
    let candidates = [
        (path.join(".git"), Some(path.to_path_buf())),
        (path.to_path_buf(), None),
        (with_suffix(".git").join(".git"), Some(with_suffix(".git"))),
        (with_suffix(".git"), None),
    ];
    for (candidate, top) in candidates {
        let Ok(metadata) = std::fs::metadata(&candidate) else { continue };
        if metadata.is_file() {
            // A gitfile: git uses what it names, or stops with an error.
            let text = read_checked(&candidate).ok()??;
            let target = String::from_utf8_lossy(&text);
            let target = target.trim().strip_prefix("gitdir:")?.trim().to_string();
            let base = candidate.parent()?;
            let git_dir = normalize(&base.join(target));
            return is_git_dir(&git_dir).then_some(Found { git_dir, top });
        }
        if metadata.is_dir() && is_git_dir(&candidate) {
            return Some(Found { git_dir: candidate, top });
        }
    }
    None
}

/// A repository as git finds it.
struct Found {
    git_dir: PathBuf,
    /// The working tree's top, `None` for a bare repository.
    top: Option<PathBuf>,
}

fn risk_at(dir: &Path, depth: usize, can_write: Option<&dyn Fn(&Path) -> bool>) -> Option<String> {
    match find(dir) {
        Ok(Some(found)) => risk_of(found, depth, can_write),
        Ok(None) => None,
        Err(reason) => Some(reason),
    }
}

fn risk_of(
    found: Found,
    depth: usize,
    can_write: Option<&dyn Fn(&Path) -> bool>,
) -> Option<String> {
    let common = match read_checked(&found.git_dir.join("commondir")) {
        Ok(Some(common)) => normalize(&found.git_dir.join(String::from_utf8_lossy(&common).trim())),
        Ok(None) => found.git_dir.clone(),
        Err(reason) => return Some(reason),
    };
    let mut files = vec![found.git_dir.join("config"), found.git_dir.join("config.worktree")];
    if common != found.git_dir {
        files.push(common.join("config"));
        files.push(common.join("config.worktree"));
    }
    // The repository's own files, before its submodules': they say where its hooks are.
    let own = files.len();
    if let Err(reason) = collect_configs(&common.join("modules"), 0, &mut files) {
        return Some(reason);
    }
    let mut hooks_path = None;
    let mut hash_len = 20;
    for (index, file) in files.into_iter().enumerate() {
        let bytes = match read_checked(&file) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => continue,
            Err(reason) => return Some(reason),
        };
        let entries = match entries(&bytes) {
            Ok(entries) => entries,
            Err(reason) => {
                return Some(format!("cannot read {} to check it: {reason}", file.display()));
            }
        };
        for entry in &entries {
            if let Some(setting) = entry.risky() {
                return Some(format!(
                    "the repository's own config ({}) sets `{setting}`, which can make git run \
                     programs",
                    file.display()
                ));
            }
            if index < own && entry.section == "core" && entry.key == "hookspath" {
                hooks_path = Some(entry.value.clone());
            }
            if index < own
                && entry.section == "extensions"
                && entry.key == "objectformat"
                && entry.value.eq_ignore_ascii_case("sha256")
            {
                hash_len = 32;
            }
        }
    }
    let hooks = match hooks_path {
        None => common.join("hooks"),
        Some(path) if path.starts_with('~') => {
            return Some(format!("the repository's hooks are in `{path}`, which is not checked"));
        }
        Some(path) => normalize(&found.top.clone().unwrap_or(found.git_dir.clone()).join(path)),
    };
    if let Some(can_write) = can_write
        && let Some(reason) = changeable(&found.git_dir, &common, &hooks, can_write)
    {
        return Some(reason);
    }
    for hook in READING_HOOKS {
        let hook = hooks.join(hook);
        if hook.exists() {
            return Some(format!(
                "the repository has a hook {} that git runs when reading commands refresh \
                 the index",
                hook.display()
            ));
        }
    }
    // `status` and `diff` look into submodules, with their own config and hooks.
    let top = found.top?;
    if depth >= MAX_SUBMODULE_DEPTH && can_write.is_none() {
        return None;
    }
    let submodules = match submodules(&top, &found.git_dir, hash_len) {
        Ok(submodules) => submodules,
        Err(reason) => return Some(reason),
    };
    // Run outside the sandbox, what is not checked is a risk.
    if depth >= MAX_SUBMODULE_DEPTH && submodules.iter().any(|sub| sub.join(".git").exists()) {
        return Some(format!("{} has submodules nested deeper than are checked", top.display()));
    }
    if submodules.len() > MAX_SUBMODULES {
        return Some(format!("{} has more submodules than are checked", top.display()));
    }
    for submodule in submodules {
        if submodule == top || !submodule.join(".git").exists() {
            continue;
        }
        // Run outside the sandbox, git runs a submodule's hooks (`push
        // --recurse-submodules`): only a git directory git made under the superproject's
        // own (`modules/`) is as safe as it; a `.git` in the working tree may be the
        // model's, made after the session began (the sandbox keeps it read-only only
        // from then on).
        if can_write.is_some() {
            // A linked worktree's submodules are under its own git directory.
            let kept = [common.join("modules"), found.git_dir.join("modules")];
            let kept: Vec<PathBuf> =
                kept.iter().filter_map(|dir| dir.canonicalize().ok()).collect();
            let inside = match find(&submodule) {
                Ok(Some(sub)) => sub
                    .git_dir
                    .canonicalize()
                    .is_ok_and(|real| kept.iter().any(|dir| real.starts_with(dir))),
                Ok(None) | Err(_) => false,
            };
            if !inside {
                return Some(format!(
                    "its submodule {} keeps its own git directory in the working tree, which \
                     is not checked",
                    submodule.display()
                ));
            }
        }
        if let Some(reason) = risk_at(&submodule, depth + 1, can_write) {
            return Some(reason);
        }
    }
    None
}

/// Why what git reads and runs of a repository (its git and common directories, its
/// hooks directory and each hook, symlinks followed) can be changed by the model, if it
/// can.
fn changeable(
    git_dir: &Path,
    common: &Path,
    hooks: &Path,
    can_write: &dyn Fn(&Path) -> bool,
) -> Option<String> {
    for (what, place) in [("git directory", git_dir), ("git directory", common), ("hooks", hooks)] {
        if can_write(place) {
            return Some(format!(
                "the repository's {what} {} is where sandboxed commands or the file tools \
                 can write",
                place.display()
            ));
        }
    }
    let hooks = std::fs::read_dir(hooks).into_iter().flatten().flatten();
    hooks.map(|hook| hook.path()).find(|hook| can_write(hook)).map(|hook| {
        format!(
            "the repository's hook {} leads where sandboxed commands or the file tools can \
             write",
            hook.display()
        )
    })
}

/// The submodules of the working tree `top` (whose git directory is `git_dir`): the
/// paths `.gitmodules` names and the gitlinks of the index, which git follows even
/// without a `.gitmodules`. Either file unreadable is an error, not "none".
fn submodules(top: &Path, git_dir: &Path, hash_len: usize) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    let gitmodules = read_checked(&top.join(".gitmodules"))?.unwrap_or_default();
    for line in String::from_utf8_lossy(&gitmodules).lines() {
        let Some((key, path)) = line.split_once('=') else { continue };
        if key.trim() == "path" {
            found.push(normalize(&top.join(path.trim())));
        }
    }
    let index = git_dir.join("index");
    if std::fs::symlink_metadata(&index).is_ok() {
        let unreadable = || format!("cannot read the index {} to find submodules", index.display());
        let bytes = read_small_regular(&index, MAX_INDEX_BYTES).ok_or_else(unreadable)?;
        let entries = index_entries(&bytes, hash_len).ok_or_else(unreadable)?;
        for (path, mode) in entries {
            if mode & 0o170000 == GITLINK {
                found.push(normalize(&top.join(path)));
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}

/// The content of the repository file `path`, `None` when there is none, or why it
/// cannot be trusted: not a regular file of at most [`MAX_FILE_BYTES`] (a FIFO, a
/// device, a symlink) or unreadable.
fn read_checked(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {} to check it: {error}", path.display())),
    }
    match read_small_regular(path, MAX_FILE_BYTES) {
        Some(bytes) => Ok(Some(bytes)),
        None => Err(format!(
            "cannot read {} to check it: not a regular file of at most 1 MiB",
            path.display()
        )),
    }
}

/// The repository git would use from `dir`: the first `.git` (directory, or a file
/// naming one) on the way up, or a directory that may itself be a repository (a bare
/// one, a worktree's git directory): any with a `HEAD` or a `commondir`.
fn find(dir: &Path) -> Result<Option<Found>, String> {
    for candidate in dir.ancestors() {
        let dot_git = candidate.join(".git");
        let top = Some(candidate.to_path_buf());
        if dot_git.is_dir() {
            return Ok(Some(Found { git_dir: dot_git, top }));
        }
        if let Some(text) = read_checked(&dot_git)? {
            let text = String::from_utf8_lossy(&text);
            let Some(target) = text.trim().strip_prefix("gitdir:") else {
                return Err(format!("{} does not name a git directory", dot_git.display()));
            };
            let git_dir = normalize(&candidate.join(target.trim()));
            return Ok(Some(Found { git_dir, top }));
        }
        // git also takes a directory whose `commondir` names objects elsewhere, so any
        // `HEAD` or `commondir` counts: a repository found here, never one further up.
        if ["HEAD", "commondir"]
            .iter()
            .any(|name| std::fs::symlink_metadata(candidate.join(name)).is_ok())
        {
            return Ok(Some(Found { git_dir: candidate.to_path_buf(), top: None }));
        }
    }
    Ok(None)
}

/// Config files of submodules (`modules/NAME/config`, names may hold `/`, nested
/// under each one's own `modules/`), a bounded walk that looks into nothing else of a
/// git directory. More than it walks, or a directory it cannot list, is an error.
fn collect_configs(dir: &Path, depth: usize, files: &mut Vec<PathBuf>) -> Result<(), String> {
    const MAX_DEPTH: usize = 12;
    const MAX_FILES: usize = 1024;
    let too_many = || format!("{} holds more submodules than are checked", dir.display());
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(format!("cannot list {} to check it: {error}", dir.display())),
    };
    if depth >= MAX_DEPTH {
        return Err(too_many());
    }
    for entry in entries {
        let path = entry.map_err(|error| format!("cannot list {}: {error}", dir.display()))?.path();
        if !path.is_dir() {
            continue;
        }
        if path.join("HEAD").exists() || path.join("config").exists() {
            if files.len() >= MAX_FILES {
                return Err(too_many());
            }
            files.push(path.join("config"));
            files.push(path.join("config.worktree"));
            collect_configs(&path.join("modules"), depth + 1, files)?;
        } else {
            collect_configs(&path, depth + 1, files)?;
        }
    }
    Ok(())
}

/// One `key = value` of a git config file, names in lower case.
struct Entry {
    section: String,
    /// `[section "sub"]` or `[section.sub]`.
    subsection: bool,
    key: String,
    value: String,
}

impl Entry {
    /// The setting, when it can make reading commands run a program (or brings in a
    /// file that is not checked).
    fn risky(&self) -> Option<String> {
        let key = self.key.as_str();
        let risky = match self.section.as_str() {
            "filter" | "pager" | "alias" | "include" | "includeif" | "gpg" | "trace2" => true,
            "core" => {
                matches!(
                    key,
                    "pager" | "sshcommand" | "askpass" | "gitproxy" | "alternaterefscommand"
                ) || (key == "fsmonitor"
                    && !matches!(
                        self.value.to_ascii_lowercase().as_str(),
                        "false" | "no" | "off" | "0" | ""
                    ))
            }
            "diff" => {
                (!self.subsection && key == "external")
                    || (self.subsection && matches!(key, "textconv" | "command"))
            }
            "log" => key == "showsignature",
            _ => false,
        };
        risky.then(|| format!("{}.{key}", self.section))
    }
}

/// The entries of the git config text `bytes`, as git itself reads them (`git config
/// --file - --list -z`: its grammar has continued values, comments, several sections on
/// one line...), or why they cannot be had. Nothing but these bytes is read: no system
/// or global config, no includes, no repository (`git config` runs no hooks or
/// programs); git gets [`GIT_TIMEOUT`] and its output is bounded.
fn entries(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let mut command = std::process::Command::new("git");
    command
        .args(["config", "--no-includes", "--list", "-z", "--file", "-"])
        .current_dir("/")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", "/nonexistent")
        .env("GIT_CEILING_DIRECTORIES", "/");
    let stdout = run_git(command, bytes.to_vec())?;
    Ok(parse_list(&String::from_utf8_lossy(&stdout)))
}

/// Runs `command` (a git that runs no hook or program) with `input` on its stdin, for
/// [`GIT_TIMEOUT`] at most; what it printed, at most [`MAX_LIST_BYTES`].
pub(super) fn run_git(
    mut command: std::process::Command,
    input: Vec<u8>,
) -> Result<Vec<u8>, String> {
    use std::io::{Read, Write};
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| format!("cannot run git to read it: {error}"))?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("cannot talk to git to read it".into());
    };
    // Threads, so neither side blocks the other on a full pipe.
    std::thread::spawn(move || stdin.write_all(&input));
    let read_all = |pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.take(MAX_LIST_BYTES + 1).read_to_end(&mut out);
            out
        })
    };
    let stdout = read_all(Box::new(stdout));
    let stderr = read_all(Box::new(stderr));
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("git did not finish reading it".into());
            }
        }
    };
    let stdout = stdout.join().map_err(|_| "cannot read what git printed".to_string())?;
    let stderr = stderr.join().map_err(|_| "cannot read what git printed".to_string())?;
    if !status.success() {
        let message = String::from_utf8_lossy(&stderr);
        return Err(format!("git cannot read it: {}", message.trim()));
    }
    if stdout.len() as u64 > MAX_LIST_BYTES {
        return Err("it holds too many settings".into());
    }
    Ok(stdout)
}

/// The entries of `git config --list -z` output: `section[.subsection].key` and a
/// newline and the value, each ended by a NUL; a key without `=` has no newline (true).
fn parse_list(list: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    for item in list.split('\0').filter(|item| !item.is_empty()) {
        let (name, value) = item.split_once('\n').unwrap_or((item, "true"));
        let (section, rest) = name.split_once('.').unwrap_or((name, ""));
        let (subsection, key) = match rest.rsplit_once('.') {
            Some((_, key)) => (true, key),
            None => (false, rest),
        };
        entries.push(Entry {
            section: section.to_ascii_lowercase(),
            subsection,
            key: key.to_ascii_lowercase(),
            value: value.to_string(),
        });
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn risky(text: &str) -> Option<String> {
        match entries(text.as_bytes()) {
            Ok(entries) => entries.iter().find_map(Entry::risky),
            Err(reason) => Some(reason),
        }
    }

    #[test]
    fn risky_settings_are_found_in_any_spelling() {
        for text in [
            "[core]\n\tfsmonitor = ./hook\n",
            "[core] pager = sh -c x\n",
            "[diff \"pdf\"]\n\ttextconv = ./x\n",
            "[diff.pdf]\n\tcommand = ./x\n",
            "[diff]\nexternal = ./x\n",
            "[filter \"lfs\"]\nsmudge = x\n",
            "[include]\npath = other\n",
            "[includeIf \"gitdir:/x\"]\npath = other\n",
            "[log]\nshowSignature\n",
            "[CORE]\nSSHCommand = x\n",
            "[core\n",
            // git does not continue a comment, nor a value ending in an escaped `\\`.
            "[core]\n# a comment \\\nfsmonitor = ./hook\n",
            "[core]\neditor = \"a\\\\\"\nfsmonitor = ./hook\n",
            // Several headers on one line.
            "[user][core]fsmonitor = x\n",
        ] {
            assert!(risky(text).is_some(), "{text}");
        }
        for text in [
            "[core]\n\tbare = false\n\tfsmonitor = false\n",
            "[diff]\n\tcolorMoved = zebra\n",
            "[core]\n\teditor = a \\\n pager = y\n",
        ] {
            assert_eq!(risky(text), None, "{text}");
        }
    }
}
