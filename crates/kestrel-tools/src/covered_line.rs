//! A shell line the allow rules cover, as it is run. In ask (`Unconfined::ByRules`) it
//! runs outside the sandbox: checked once more right before, and its `git` pinned to the
//! workspace's repository, so that what sandboxed processes did since the line was
//! judged (a `sub/.git` with hooks, a program planted on PATH) cannot ride on the rule.
//! In auto (`Unconfined::Lifted`) it runs in the sandbox, widened only by the `allow_write`
//! places it writes, and contained.

use crate::Lift;
use crate::permission::PinnedRepository;
use crate::workspace::resolve_existing;
use kestrel_platform::SandboxPolicy;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The script that runs `line`: a `git` function first (`command git` with `GIT_DIR`
/// and `GIT_WORK_TREE` of `repository`), then the line as written. A function, not
/// exported variables: programs the line starts (a test suite making its own
/// repositories) see git as usual. Fails, saying why, when the line must not run.
pub(crate) fn script(
    line: &str,
    repository: Option<&PinnedRepository>,
    path: Option<&OsStr>,
    workspace: &Path,
) -> Result<String, String> {
    trusted_path(path, workspace)?;
    let Some(repository) = repository else { return Ok(line.to_string()) };
    if !repository.still_there() {
        return Err(replaced(repository));
    }
    // `function NAME`: an alias `git` from the login profile is not expanded here, as
    // it would be in `git() {`, a syntax error then.
    let mut function = format!("function git {{ GIT_DIR={}", quote(&repository.git_dir));
    if let Some(top) = &repository.work_tree {
        function.push_str(&format!(" GIT_WORK_TREE={}", quote(top)));
    }
    function.push_str(" command git \"$@\"; }\n");
    Ok(function + line)
}

/// Widens `policy` by what `lift` names: the `allow_write` places writable (but the
/// `.git` and `.kestrel` in them); the line contained (nothing it starts keeps running
/// after it).
pub(crate) fn widen(policy: &mut SandboxPolicy, lift: &Lift) {
    for place in &lift.writable {
        // Git's and Kestrel's metadata beneath it stay read-only, as in the workspace.
        policy.protected.extend(SandboxPolicy::workspace_write(place, false).protected);
        policy.writable.push(place.clone());
    }
    policy.contained = true;
}

fn replaced(repository: &PinnedRepository) -> String {
    format!(
        "not run: the allow rules cover this command for the workspace's repository, {}, \
         but that is no longer the directory the session began with (it was replaced or \
         removed)",
        repository.git_dir.display()
    )
}

/// Fails, saying why, when `path` (the login shell's `PATH`) holds an entry sandboxed
/// commands can write: a program put there could stand in for the one a rule names, and
/// run outside the sandbox with it.
fn trusted_path(path: Option<&OsStr>, workspace: &Path) -> Result<(), String> {
    match writable_path_entry(path, workspace) {
        None => Ok(()),
        Some(entry) => Err(format!(
            "not run: the allow rules cover this command, so it would run outside the \
             sandbox, but PATH holds {entry}, where sandboxed commands can write: a program \
             put there could stand in for the one the rule names. Take {entry} out of PATH \
             in the login profile to use the rule."
        )),
    }
}

/// The first entry of `path` that sandboxed commands can write (relative ones resolve
/// against a directory in the workspace), shown as written.
fn writable_path_entry(path: Option<&OsStr>, workspace: &Path) -> Option<String> {
    let writable: Vec<PathBuf> = SandboxPolicy::workspace_write(workspace, false)
        .writable
        .iter()
        .map(|place| resolve_existing(place))
        .collect();
    std::env::split_paths(path?).find_map(|entry| {
        let shown =
            if entry.as_os_str().is_empty() { ".".into() } else { entry.display().to_string() };
        let real = resolve_existing(&entry);
        let open = !entry.is_absolute() || writable.iter().any(|place| real.starts_with(place));
        open.then_some(shown)
    })
}

/// `path` as one shell word.
fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_entries_in_the_workspace_or_relative_are_found() {
        let workspace = tempfile::tempdir().unwrap();
        let bin = workspace.path().join("bin");
        let path = format!("/usr/bin:{}:/bin", bin.display());
        assert_eq!(
            writable_path_entry(Some(OsStr::new(&path)), workspace.path()),
            Some(bin.display().to_string())
        );
        assert_eq!(
            writable_path_entry(Some(OsStr::new("/usr/bin::/bin")), workspace.path()),
            Some(".".into())
        );
        assert_eq!(
            writable_path_entry(Some(OsStr::new("node_modules/.bin:/usr/bin")), workspace.path()),
            Some("node_modules/.bin".into())
        );
        assert_eq!(writable_path_entry(Some(OsStr::new("/usr/bin:/bin")), workspace.path()), None);
    }

    #[test]
    fn the_git_function_runs_in_the_pinned_repository_despite_an_alias_and_a_quote() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("it's");
        std::fs::create_dir(&work).unwrap();
        let git = |args: &[&str]| {
            std::process::Command::new("git").args(args).current_dir(&work).output().unwrap()
        };
        assert!(git(&["init", "-q"]).status.success());
        let repository = crate::permission::pinned(&work).unwrap();
        let rc = dir.path().join("rc");
        std::fs::write(&rc, "shopt -s expand_aliases\nalias git='git --no-pager'\n").unwrap();
        let script =
            script("cd / && git rev-parse --absolute-git-dir", Some(&repository), None, &work)
                .unwrap();
        let output = std::process::Command::new("bash")
            .args(["-c", &script])
            .env("BASH_ENV", &rc)
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(printed.trim(), repository.git_dir.display().to_string());
    }

    #[test]
    fn the_git_function_quotes_its_paths() {
        let repository = PinnedRepository {
            git_dir: PathBuf::from("/w/it's/.git"),
            work_tree: Some(PathBuf::from("/w/it's")),
            device: 0,
            inode: 0,
        };
        // Not there: refused.
        assert!(script("git status", Some(&repository), None, Path::new("/w")).is_err());
        assert_eq!(quote(Path::new("/w/it's")), r"'/w/it'\''s'");
    }
}
