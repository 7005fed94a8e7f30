//! The orchestrator's git: the `git` program, never a library (ARCHITECTURE §9). Every
//! command runs with hooks off and with attributes read from the empty tree, so nothing
//! the model wrote into the tree (hooks, `.gitattributes` naming filter, diff or merge
//! drivers) runs here; no signing prompt, no terminal prompt, no automatic gc.

use crate::SwarmError;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

/// The empty tree's id: `attr.tree` pointed at it means no in-tree `.gitattributes`.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// The oldest git with `attr.tree` (2.46): older ones would let the tree choose filters.
const MIN_VERSION: (u32, u32) = (2, 46);

/// `git worktree add` reads every other worktree's admin files, and one being added by
/// another task driver at that moment has no `commondir` yet: two at once in one
/// repository fail ("failed to read .git/worktrees/<other>/commondir"). This process's
/// adds, prunes and removes take turns.
static WORKTREES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Identity for commits when the user has none configured.
const FALLBACK_NAME: &str = "Kestrel swarm";
const FALLBACK_EMAIL: &str = "kestrel-swarm@localhost";

/// A repository (or worktree) directory to run git in.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
}

/// What a command printed, when it exited 0.
#[derive(Debug, Clone)]
pub struct GitOutput {
    pub stdout: String,
    pub stderr: String,
}

/// How a merge went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The new merge commit.
    Merged(String),
    /// Conflicts in these files (the merge is still in progress: abort or resolve it).
    Conflict(Vec<String>),
}

impl Git {
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Fails when git is missing or older than 2.46.
    pub async fn check_version() -> Result<(), SwarmError> {
        let output = Git::new(".").raw(&["version"]).await?;
        let version = output.stdout.trim().trim_start_matches("git version ").to_string();
        let mut parts = version.split('.').map(|part| part.parse::<u32>().unwrap_or(0));
        let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if found < MIN_VERSION {
            return Err(SwarmError::Usage(format!(
                "git {version} is too old for the swarm: it needs git {}.{} or newer \
                 (`attr.tree`, which keeps the tree's .gitattributes from choosing filters)",
                MIN_VERSION.0, MIN_VERSION.1
            )));
        }
        Ok(())
    }

    /// Runs `git ARGS` here; fails with git's stderr when it exits non-zero.
    pub async fn run(&self, args: &[&str]) -> Result<GitOutput, SwarmError> {
        let (status, output) = self.output(args).await?;
        if status {
            Ok(output)
        } else {
            Err(SwarmError::Git {
                command: format!("git {}", args.join(" ")),
                dir: self.dir.clone(),
                message: first_lines(&output.stderr, &output.stdout),
            })
        }
    }

    /// Runs `git ARGS` and returns whether it exited 0, with what it printed.
    pub async fn output(&self, args: &[&str]) -> Result<(bool, GitOutput), SwarmError> {
        let mut command = self.command(args);
        let output = command.output().await.map_err(|error| SwarmError::Git {
            command: format!("git {}", args.join(" ")),
            dir: self.dir.clone(),
            message: format!("cannot run git: {error}"),
        })?;
        Ok((
            output.status.success(),
            GitOutput {
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            },
        ))
    }

    /// Runs `git ARGS` with `input` on its stdin; fails like [`Git::run`].
    pub async fn run_with_input(
        &self,
        args: &[&str],
        input: &[u8],
    ) -> Result<GitOutput, SwarmError> {
        use tokio::io::AsyncWriteExt;
        let failed = |message: String| SwarmError::Git {
            command: format!("git {}", args.join(" ")),
            dir: self.dir.clone(),
            message,
        };
        let mut command = self.command(args);
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            command.spawn().map_err(|error| failed(format!("cannot run git: {error}")))?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input)
                .await
                .map_err(|error| failed(format!("cannot write to git: {error}")))?;
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|error| failed(format!("cannot run git: {error}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if !output.status.success() {
            return Err(failed(first_lines(&stderr, &stdout)));
        }
        Ok(GitOutput { stdout, stderr })
    }

    async fn raw(&self, args: &[&str]) -> Result<GitOutput, SwarmError> {
        let output = Command::new("git")
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|error| {
                SwarmError::Usage(format!("cannot run git (is it installed?): {error}"))
            })?;
        Ok(GitOutput {
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("git");
        command
            .arg("-C")
            .arg(&self.dir)
            .args(["-c", "core.hooksPath=/dev/null"])
            .args(["-c", &format!("attr.tree={EMPTY_TREE}")])
            .args(["-c", "core.fsmonitor=false"])
            .args(["-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false"])
            .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false"])
            .args(["-c", "advice.detachedHead=false"])
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("LC_ALL", "C")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// The top of the repository `dir` is in.
    pub async fn toplevel(&self) -> Result<PathBuf, SwarmError> {
        match self.output(&["rev-parse", "--show-toplevel"]).await? {
            (true, output) => Ok(PathBuf::from(output.stdout.trim())),
            (false, _) => Err(SwarmError::Usage(format!(
                "{} is not in a git repository: run the swarm inside one (git init)",
                self.dir.display()
            ))),
        }
    }

    /// The branch checked out here, or `None` when HEAD is detached or unborn.
    pub async fn current_branch(&self) -> Result<Option<String>, SwarmError> {
        let (ok, output) = self.output(&["symbolic-ref", "--quiet", "--short", "HEAD"]).await?;
        Ok(ok.then(|| output.stdout.trim().to_string()).filter(|name| !name.is_empty()))
    }

    /// The commit `rev` names, or `None` when it names none.
    pub async fn resolve(&self, rev: &str) -> Result<Option<String>, SwarmError> {
        let spec = format!("{rev}^{{commit}}");
        let (ok, output) = self.output(&["rev-parse", "--verify", "--quiet", &spec]).await?;
        Ok(ok.then(|| output.stdout.trim().to_string()).filter(|id| !id.is_empty()))
    }

    /// Whether the local branch `name` exists.
    pub async fn branch_exists(&self, name: &str) -> Result<bool, SwarmError> {
        let reference = format!("refs/heads/{name}");
        let (ok, _) = self.output(&["show-ref", "--verify", "--quiet", &reference]).await?;
        Ok(ok)
    }

    /// Makes branch `name` at `commit` unless it exists.
    pub async fn ensure_branch(&self, name: &str, commit: &str) -> Result<(), SwarmError> {
        if !self.branch_exists(name).await? {
            self.run(&["branch", "--no-track", name, commit]).await?;
        }
        Ok(())
    }

    /// A worktree at `path` on branch `branch` (made at `start` when it does not exist).
    /// An existing worktree at `path` is kept as it is.
    pub async fn add_worktree(
        &self,
        path: &Path,
        branch: &str,
        start: &str,
    ) -> Result<(), SwarmError> {
        let path_text = path.to_string_lossy().into_owned();
        let with_branch = if self.branch_exists(branch).await? {
            vec![path_text, branch.to_string()]
        } else {
            vec!["-b".to_string(), branch.to_string(), path_text, start.to_string()]
        };
        self.add_worktree_with(path, &with_branch).await
    }

    /// A worktree at `path` on `commit`, detached (the planner's).
    pub async fn add_detached_worktree(&self, path: &Path, commit: &str) -> Result<(), SwarmError> {
        let args =
            ["--detach".to_string(), path.to_string_lossy().into_owned(), commit.to_string()];
        self.add_worktree_with(path, &args).await
    }

    /// `git worktree add ARGS`, one at a time in this process. No `--force`: git's own
    /// guard (a branch checked out elsewhere, e.g. by the user) stands; only a worktree
    /// of ours whose directory went missing is added over its old entry.
    async fn add_worktree_with(&self, path: &Path, args: &[String]) -> Result<(), SwarmError> {
        if path.join(".git").exists() {
            return Ok(());
        }
        let _turn = WORKTREES.lock().await;
        let mut tries = 0;
        let mut force = false;
        loop {
            let mut command: Vec<&str> = vec!["worktree", "add"];
            if force {
                command.push("--force");
            }
            command.extend(args.iter().map(String::as_str));
            match self.run(&command).await {
                // Another orchestrator in this repository was adding a worktree at that
                // moment (its admin files half written): try again shortly.
                Err(SwarmError::Git { message, .. })
                    if message.contains("commondir")
                        && tries < 10
                        && !path.join(".git").exists() =>
                {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                Err(SwarmError::Git { message, .. })
                    if message.contains("missing but") && !force =>
                {
                    force = true;
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// Removes the worktree at `path` (its branch stays).
    pub async fn remove_worktree(&self, path: &Path) -> Result<(), SwarmError> {
        let path_text = path.to_string_lossy();
        let _turn = WORKTREES.lock().await;
        if path.exists() {
            self.run(&["worktree", "remove", "--force", "--force", &path_text]).await?;
        }
        Ok(())
    }

    /// Whether the worktree has changes (tracked or untracked, ignored files aside) or a
    /// merge in progress.
    pub async fn is_dirty(&self) -> Result<bool, SwarmError> {
        let status = self.run(&["status", "--porcelain", "--untracked-files=all"]).await?;
        Ok(!status.stdout.trim().is_empty() || self.merging().await?)
    }

    /// Whether a merge is in progress here (MERGE_HEAD exists).
    pub async fn merging(&self) -> Result<bool, SwarmError> {
        let (ok, _) = self.output(&["rev-parse", "--verify", "--quiet", "MERGE_HEAD"]).await?;
        Ok(ok)
    }

    /// Commits everything in the worktree (a merge in progress becomes its merge
    /// commit) with `message`; returns the new HEAD.
    pub async fn commit_all(&self, message: &str) -> Result<String, SwarmError> {
        self.run(&["add", "--all", "--", "."]).await?;
        let identity = self.identity().await?;
        let mut args: Vec<&str> = identity.iter().map(String::as_str).collect();
        args.extend(["commit", "--no-verify", "--allow-empty", "--quiet", "-m", message]);
        self.run(&args).await?;
        self.head().await
    }

    /// The tree of `commit`.
    pub async fn tree(&self, commit: &str) -> Result<String, SwarmError> {
        let spec = format!("{commit}^{{tree}}");
        Ok(self.run(&["rev-parse", &spec]).await?.stdout.trim().to_string())
    }

    pub async fn head(&self) -> Result<String, SwarmError> {
        Ok(self.run(&["rev-parse", "HEAD"]).await?.stdout.trim().to_string())
    }

    /// Files with conflict markers git knows of (unmerged paths).
    pub async fn unmerged_files(&self) -> Result<Vec<String>, SwarmError> {
        let output = self.run(&["diff", "--name-only", "--diff-filter=U"]).await?;
        Ok(output.stdout.lines().map(str::to_string).filter(|line| !line.is_empty()).collect())
    }

    /// `git merge --no-ff` of `rev` into the checked-out branch with `message`.
    pub async fn merge(&self, rev: &str, message: &str) -> Result<MergeOutcome, SwarmError> {
        let identity = self.identity().await?;
        let mut args: Vec<&str> = identity.iter().map(String::as_str).collect();
        args.extend(["merge", "--no-ff", "--no-verify", "--no-edit", "-m", message, rev]);
        let (ok, output) = self.output(&args).await?;
        if ok {
            return Ok(MergeOutcome::Merged(self.head().await?));
        }
        let files = self.unmerged_files().await?;
        if files.is_empty() {
            // Not a conflict: a real failure (e.g. an untracked file in the way).
            return Err(SwarmError::Git {
                command: format!("git merge {rev}"),
                dir: self.dir.clone(),
                message: first_lines(&output.stderr, &output.stdout),
            });
        }
        Ok(MergeOutcome::Conflict(files))
    }

    pub async fn merge_abort(&self) -> Result<(), SwarmError> {
        if self.merging().await? {
            self.run(&["merge", "--abort"]).await?;
        }
        Ok(())
    }

    /// Sets the checked-out branch and worktree to `commit`.
    pub async fn reset_hard(&self, commit: &str) -> Result<(), SwarmError> {
        self.run(&["reset", "--hard", "--quiet", commit]).await?;
        Ok(())
    }

    /// `git diff <merge-base of base and head>...head`.
    pub async fn diff_since(&self, base: &str, head: &str) -> Result<String, SwarmError> {
        let range = format!("{base}...{head}");
        Ok(self
            .run(&["diff", "--no-color", "--no-ext-diff", "--no-textconv", &range])
            .await?
            .stdout)
    }

    /// `(task, attempt, commit)` of every merge of `run` on `branch`, from the
    /// `Kestrel-Swarm:` trailers: what git says was merged, whatever the events say.
    pub async fn swarm_merges(
        &self,
        branch: &str,
        run: &str,
    ) -> Result<Vec<(String, u32, String)>, SwarmError> {
        let format = format!(
            "--format=%H %(trailers:key={},valueonly,separator=%x20)",
            kestrel_protocol::swarm::MERGE_TRAILER
        );
        let output = self.run(&["log", "--merges", "--first-parent", &format, branch]).await?;
        let mut merges = Vec::new();
        for line in output.stdout.lines() {
            let mut parts = line.split_whitespace();
            let (Some(commit), Some(trailer)) = (parts.next(), parts.next()) else { continue };
            let mut fields = trailer.split('/');
            let (Some(trailer_run), Some(task), Some(attempt)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if trailer_run == run
                && let Ok(attempt) = attempt.parse()
            {
                merges.push((task.to_string(), attempt, commit.to_string()));
            }
        }
        Ok(merges)
    }

    /// A fresh clone of this repository at `commit` in `path` (objects shared, not
    /// copied: `--shared`), checked out detached.
    pub async fn clone_at(&self, path: &Path, commit: &str) -> Result<(), SwarmError> {
        let source = self.dir.to_string_lossy().into_owned();
        let target = path.to_string_lossy().into_owned();
        self.run(&["clone", "--quiet", "--shared", "--no-checkout", &source, &target]).await?;
        Git::new(path).run(&["checkout", "--quiet", "--detach", commit]).await?;
        Ok(())
    }

    /// `-c user.name=… -c user.email=…` when the user has no identity configured, so a
    /// commit never fails on a machine without one.
    async fn identity(&self) -> Result<Vec<String>, SwarmError> {
        let (ok, output) = self.output(&["config", "user.email"]).await?;
        if ok && !output.stdout.trim().is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![
            "-c".into(),
            format!("user.name={FALLBACK_NAME}"),
            "-c".into(),
            format!("user.email={FALLBACK_EMAIL}"),
        ])
    }
}

/// The first lines of what a failed command said, for an error message.
fn first_lines(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() { stdout } else { stderr };
    let lines: Vec<&str> = text.lines().filter(|line| !line.trim().is_empty()).take(6).collect();
    lines.join("\n")
}
