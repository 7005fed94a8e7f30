//! The hooks a repository runs. In auto, a git rule makes the repository's git directory
//! writable for its line; a hook would run in that line, and a hook often runs what the
//! workspace defines (pre-commit's `.pre-commit-config.yaml`, a Makefile, `npm test`),
//! which the model can write in auto: with `.git` writable, that code could plant what
//! git runs outside the sandbox later (a rebase's `exec`, another worktree's
//! `commondir`...). So a repository that runs hooks gets nothing from a git rule in auto.

use super::PinnedRepository;
use super::repository::run_git;
use std::path::{Path, PathBuf};

/// The hooks `repository` may run: every file in its hooks directory (as git finds it:
/// `core.hooksPath` of any config, else the git directory's `hooks`) but git's samples,
/// and `hook.*` settings of its config, or why that cannot be told.
pub(crate) fn active_hooks(repository: &PinnedRepository) -> Result<Vec<String>, String> {
    let dir = repository.work_tree.as_deref().unwrap_or(&repository.git_dir);
    let mut command = std::process::Command::new("git");
    command.args(["rev-parse", "--git-path", "hooks"]).current_dir(dir);
    let printed = run_git(command, Vec::new())?;
    let hooks = PathBuf::from(String::from_utf8_lossy(&printed).trim());
    let hooks = if hooks.is_absolute() { hooks } else { dir.join(hooks) };
    let mut found = files_in(&hooks);
    let mut command = std::process::Command::new("git");
    command.args(["config", "--get-regexp", r"^hook\."]).current_dir(dir);
    // No match: git exits 1, which is "none".
    if let Ok(printed) = run_git(command, Vec::new()) {
        let text = String::from_utf8_lossy(&printed);
        found.extend(
            text.lines().filter_map(|line| line.split_whitespace().next()).map(String::from),
        );
    }
    Ok(found)
}

/// The names of the files in `dir` that are not git's `*.sample`s.
fn files_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".sample"))
        .collect();
    names.sort();
    names
}
