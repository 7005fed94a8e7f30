//! The private git object store that snapshots write to: a bare repository under the
//! session's checkpoint directory whose alternates name the workspace's own object
//! stores, so content git already has (tracked, unchanged files) is reused, never copied,
//! and nothing is ever written to the user's `.git`.
//!
//! Only plumbing that reads no work tree runs (`cat-file`, `hash-object --no-filters`),
//! with `GIT_DIR` set to the private repository: no repository's config, attributes,
//! filters, hooks or fsmonitor take part. Object ids are computed here (SHA-1 or SHA-256,
//! as the workspace's repository uses), so unchanged content costs no git process.

use ring::digest::{Context, SHA1_FOR_LEGACY_USE_ONLY, SHA256};
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// No object larger than this is read back (no snapshotted file is larger).
const MAX_READ_BYTES: u64 = super::snapshot::MAX_HASHED_BYTES;
/// No git command may hold a call up longer than this, plus a second per 100 objects
/// it handles ([`timeout_for`]): a store that blocks (a FIFO planted where git reads)
/// fails the snapshot in seconds, not minutes.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a git command handling `items` objects or paths may take.
fn timeout_for(items: usize) -> Duration {
    GIT_TIMEOUT + Duration::from_secs(u64::try_from(items / 100).unwrap_or(u64::MAX))
}

/// Which hash names objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ObjectFormat {
    Sha1,
    Sha256,
}

impl ObjectFormat {
    fn context(self) -> Context {
        match self {
            ObjectFormat::Sha1 => Context::new(&SHA1_FOR_LEGACY_USE_ONLY),
            ObjectFormat::Sha256 => Context::new(&SHA256),
        }
    }

    /// How many bytes an object id has.
    pub(crate) fn hash_len(self) -> usize {
        match self {
            ObjectFormat::Sha1 => 20,
            ObjectFormat::Sha256 => 32,
        }
    }

    /// The id git gives a blob of `content`.
    pub(crate) fn blob_id(self, content: &[u8]) -> String {
        let mut context = self.context();
        context.update(format!("blob {}\0", content.len()).as_bytes());
        context.update(content);
        hex(context.finish().as_ref())
    }

    /// The blob id of the file at `path`, streamed; `None` when its length is not
    /// `expected` (it changed while being read).
    pub(crate) fn file_blob_id(
        self,
        path: &Path,
        expected: u64,
    ) -> std::io::Result<Option<String>> {
        let mut file = open_regular(path)?;
        let mut context = self.context();
        context.update(format!("blob {expected}\0").as_bytes());
        let mut buffer = vec![0; 256 * 1024];
        let mut total = 0u64;
        loop {
            let read = file.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            total += read as u64;
            if total > expected {
                return Ok(None);
            }
            context.update(&buffer[..read]);
        }
        Ok((total == expected).then(|| hex(context.finish().as_ref())))
    }
}

/// Opens `path` for reading only if it is a regular file: a FIFO or a symlink put in
/// its place since the walk must not block the snapshot or lead it elsewhere.
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK | libc::O_NOFOLLOW,
    );
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file any more"));
    }
    Ok(file)
}

/// Whether every `info/alternates` file git would read starting at the object directory
/// `objects` (the chain it names, as deep as git follows) is absent or a regular file
/// of sane size, so that git reading them cannot block or be led into a device.
pub(crate) fn alternates_are_regular(objects: &Path) -> bool {
    fn check(objects: &Path, depth: usize) -> bool {
        let path = objects.join("info").join("alternates");
        let metadata = match std::fs::symlink_metadata(&path) {
            Ok(metadata) => metadata,
            Err(error) => return error.kind() == std::io::ErrorKind::NotFound,
        };
        if !metadata.is_file() || metadata.len() > 1024 * 1024 || depth >= 5 {
            return false;
        }
        let mut text = String::new();
        if open_regular(&path).and_then(|mut file| file.read_to_string(&mut text)).is_err() {
            return false;
        }
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .all(|line| check(&objects.join(line), depth + 1))
    }
    check(objects, 0)
}

/// A bare repository of our own holding snapshot content.
#[derive(Debug)]
pub(crate) struct ObjectStore {
    git_dir: PathBuf,
    pub(crate) format: ObjectFormat,
}

impl ObjectStore {
    /// Opens (creating it when needed) the private repository at `git_dir`, with the
    /// object format of the repository containing `workspace`, if any. Returns it and
    /// the workspace repository's object directory.
    ///
    /// Fails when git is missing or the repository cannot be created.
    pub(crate) async fn open(
        git_dir: &Path,
        workspace: &Path,
    ) -> Result<(Self, Option<PathBuf>), String> {
        let probe = run(
            plain_git(workspace).args(["rev-parse", "--git-common-dir", "--show-object-format"]),
            None,
            0,
        )
        .await;
        let (user_objects, format) = match probe {
            Ok(output) => {
                let text = String::from_utf8_lossy(&output).into_owned();
                let mut lines = text.lines();
                let common = lines.next().map(|dir| workspace.join(dir).join("objects"));
                let format = match lines.next() {
                    Some("sha256") => ObjectFormat::Sha256,
                    Some(_) | None => ObjectFormat::Sha1,
                };
                (common.filter(|dir| dir.is_dir()), format)
            }
            // Not a repository (or one git will not read): nothing to reuse.
            Err(_) => (None, ObjectFormat::Sha1),
        };
        if !git_dir.join("HEAD").is_file() {
            let mut init = plain_git(workspace);
            init.args(["init", "--quiet", "--bare"]);
            if format == ObjectFormat::Sha256 {
                init.arg("--object-format=sha256");
            }
            run(init.arg(git_dir), None, 0).await?;
        }
        Ok((Self { git_dir: git_dir.to_path_buf(), format }, user_objects))
    }

    /// Names the object directories git may read content from besides our own.
    pub(crate) fn set_alternates(&self, dirs: &[PathBuf]) -> Result<(), String> {
        let info = self.git_dir.join("objects").join("info");
        std::fs::create_dir_all(&info).map_err(|error| format!("{}: {error}", info.display()))?;
        let mut text = String::new();
        for dir in dirs {
            // A name with a newline cannot be listed; that store is simply not reused.
            let shown = dir.display().to_string();
            if !shown.contains('\n') {
                text.push_str(&shown);
                text.push('\n');
            }
        }
        let path = info.join("alternates");
        std::fs::write(&path, text).map_err(|error| format!("{}: {error}", path.display()))
    }

    /// Which of `ids` neither our store nor an alternate holds.
    pub(crate) async fn missing(&self, ids: &[String]) -> Result<HashSet<String>, String> {
        if ids.is_empty() {
            return Ok(HashSet::new());
        }
        let mut input = Vec::with_capacity(ids.len() * 65);
        for id in ids {
            input.extend_from_slice(id.as_bytes());
            input.push(b'\n');
        }
        let output =
            run(self.git().args(["cat-file", "--batch-check"]), Some(input), ids.len()).await?;
        Ok(String::from_utf8_lossy(&output)
            .lines()
            .filter_map(|line| line.strip_suffix(" missing"))
            .map(str::to_string)
            .collect())
    }

    /// The size of each of `ids` the stores hold.
    async fn sizes(&self, ids: &[String]) -> Result<HashMap<String, u64>, String> {
        let mut input = Vec::with_capacity(ids.len() * 65);
        for id in ids {
            input.extend_from_slice(id.as_bytes());
            input.push(b'\n');
        }
        let output =
            run(self.git().args(["cat-file", "--batch-check"]), Some(input), ids.len()).await?;
        Ok(String::from_utf8_lossy(&output)
            .lines()
            .filter_map(|line| match line.split(' ').collect::<Vec<_>>()[..] {
                [id, "blob", size] => Some((id.to_string(), size.parse().ok()?)),
                _ => None,
            })
            .collect())
    }

    /// Writes the content of each file of `paths` (absolute, no newline in them) as a
    /// blob, byte for byte; returns their ids in order.
    pub(crate) async fn write_files(&self, paths: &[PathBuf]) -> Result<Vec<String>, String> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut input = Vec::new();
        for path in paths {
            input.extend_from_slice(path.as_os_str().as_encoded_bytes());
            input.push(b'\n');
        }
        let output = run(
            self.git().args(["hash-object", "-w", "--no-filters", "--stdin-paths"]),
            Some(input),
            paths.len(),
        )
        .await?;
        let ids: Vec<String> =
            String::from_utf8_lossy(&output).lines().map(str::to_string).collect();
        if ids.len() != paths.len() {
            return Err(format!(
                "git hash-object named {} objects for {} files",
                ids.len(),
                paths.len()
            ));
        }
        Ok(ids)
    }

    /// Writes the content of one file (any name) as a blob; returns its id.
    pub(crate) async fn write_file(&self, path: &Path) -> Result<String, String> {
        let owned = path.to_path_buf();
        let content = tokio::task::spawn_blocking(move || {
            let mut content = Vec::new();
            open_regular(&owned)?.read_to_end(&mut content)?;
            Ok::<_, std::io::Error>(content)
        })
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| format!("{}: {error}", path.display()))?;
        let output = run(
            self.git().args(["hash-object", "-w", "--no-filters", "--stdin"]),
            Some(content),
            1,
        )
        .await?;
        Ok(String::from_utf8_lossy(&output).trim().to_string())
    }

    /// Reads blobs `ids`, calling `take` with each id and its content (checked against
    /// its id: content that is not what its name says is reported as an error).
    pub(crate) async fn read_blobs(
        &self,
        ids: &[String],
        mut take: impl FnMut(&str, Result<Vec<u8>, String>) -> Result<(), String>,
    ) -> Result<(), String> {
        if ids.is_empty() {
            return Ok(());
        }
        // Only objects of a size a snapshot keeps are read: an object planted in a
        // repository inside the workspace could claim any size.
        let sizes = self.sizes(ids).await?;
        let mut wanted = Vec::new();
        for id in ids {
            match sizes.get(id) {
                Some(size) if *size <= MAX_READ_BYTES => wanted.push(id.clone()),
                Some(_) => {
                    take(id, Err(format!("object {id} is larger than any snapshotted file")))?
                }
                None => take(id, Err(format!("object {id} is missing from the snapshot")))?,
            }
        }
        let ids = &wanted[..];
        if ids.is_empty() {
            return Ok(());
        }
        let mut command = self.git();
        command.args(["cat-file", "--batch"]).stdin(Stdio::piped());
        let mut child = command.spawn().map_err(|error| format!("cannot run git: {error}"))?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("git cat-file has no pipes".into());
        };
        let mut input = Vec::with_capacity(ids.len() * 65);
        for id in ids {
            input.extend_from_slice(id.as_bytes());
            input.push(b'\n');
        }
        let feed = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
        let format = self.format;
        let read = async {
            let mut reader = BufReader::new(stdout);
            for id in ids {
                let mut header = String::new();
                reader.read_line(&mut header).await.map_err(|error| error.to_string())?;
                let fields: Vec<&str> = header.trim_end().split(' ').collect();
                match fields[..] {
                    [_, "blob", size] => {
                        let size: usize =
                            size.parse().map_err(|_| format!("bad size: {header}"))?;
                        let mut content = vec![0; size + 1];
                        reader.read_exact(&mut content).await.map_err(|e| e.to_string())?;
                        content.truncate(size);
                        let checked = if format.blob_id(&content) == *id {
                            Ok(content)
                        } else {
                            Err(format!("the snapshot's copy of object {id} is damaged"))
                        };
                        take(id, checked)?;
                    }
                    _ => take(id, Err(format!("object {id} is missing from the snapshot")))?,
                }
            }
            Ok::<(), String>(())
        };
        let result = tokio::time::timeout(timeout_for(ids.len()), read)
            .await
            .map_err(|_| "git took too long".to_string())?;
        let _ = feed.await;
        let _ = child.wait().await;
        result
    }

    fn git(&self) -> Command {
        let mut command = plain_git(&self.git_dir);
        command.env("GIT_DIR", &self.git_dir);
        command
    }
}

/// `git` in `dir`, with nothing of the environment's `GIT_*` and nothing from a
/// repository that could run code: no hooks, no fsmonitor, no attributes (so no filter).
fn plain_git(dir: &Path) -> Command {
    let mut command = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            command.env_remove(key);
        }
    }
    command
        .args(["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"])
        .args(["-c", "core.attributesFile=/dev/null", "-c", "gc.auto=0"])
        .args(["-c", "core.autocrlf=false", "-c", "core.safecrlf=false"])
        .current_dir(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Runs a git command with `input` on its stdin; its stdout, or its stderr as the error.
async fn run(
    command: &mut Command,
    input: Option<Vec<u8>>,
    items: usize,
) -> Result<Vec<u8>, String> {
    if input.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().map_err(|error| format!("cannot run git: {error}"))?;
    let feed = match (input, child.stdin.take()) {
        (Some(input), Some(mut stdin)) => Some(tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        })),
        _ => None,
    };
    let output = tokio::time::timeout(timeout_for(items), child.wait_with_output())
        .await
        .map_err(|_| "git took too long".to_string())?
        .map_err(|error| format!("cannot run git: {error}"))?;
    if let Some(feed) = feed {
        let _ = feed.await;
    }
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(format!("git failed: {}", String::from_utf8_lossy(&output.stderr).trim()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
