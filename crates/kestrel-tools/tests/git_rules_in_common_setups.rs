//! What a git rule must still cover in ordinary set-ups, after the checks that keep it
//! from running what the model can change: submodules in a linked worktree, a workspace
//! deep inside an `allow_write` place, a local remote given as `../clone` or with a
//! trailing slash; and what it must not: submodules nested deeper than checked. Through
//! the permission policy's public API.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;
#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

use common::permission::{auto_lifts, git_subcommand_rules};
use kestrel_tools::permission::{AllowList, PermissionPolicy, SandboxStatus};
use std::path::Path;

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "protocol.file.allow=always", "-c", "user.name=T", "-c", "user.email=t@e"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// A repository at `dir` with one commit.
fn committed(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", "first"]);
}

/// A repository at `place/a` with a submodule `lib` (from `place/lib`), committed.
fn with_a_submodule(place: &Path) -> std::path::PathBuf {
    let lib = place.join("lib");
    committed(&lib);
    let a = place.join("a");
    committed(&a);
    git(&a, &["submodule", "add", "-q", &lib.display().to_string(), "lib"]);
    git(&a, &["commit", "-q", "-m", "lib"]);
    a
}

#[test]
fn a_linked_worktree_with_its_submodules_is_covered() {
    let place = unconfined::unconfined_scratch();
    let a = with_a_submodule(place.path());
    let tree = place.path().join("wt");
    git(&a, &["worktree", "add", "-q", &tree.display().to_string()]);
    git(&tree, &["submodule", "update", "-q", "--init"]);
    let covered = git_subcommand_rules(&tree, &["commit"]);
    assert!(auto_lifts(&covered, "git commit -q -m x"));
}

#[test]
fn a_workspace_deep_in_an_allow_write_place_is_covered() {
    let place = unconfined::unconfined_scratch();
    let work = place.path().join("h/i/j/g4");
    committed(&work);
    let rules = AllowList::from_config(&["git commit".into()], &[place.path().to_path_buf()]);
    let sandbox = SandboxStatus::Available { description: "x".into() };
    let policy = PermissionPolicy::new(work, sandbox, rules);
    assert!(auto_lifts(&policy, "git commit -q -m x"));
}

#[test]
fn a_local_remote_named_as_git_accepts_it_is_covered() {
    let place = unconfined::unconfined_scratch();
    let a = with_a_submodule(place.path());
    let clone = place.path().join("aclone");
    let (from, to) = (a.display().to_string(), clone.display().to_string());
    git(place.path(), &["clone", "-q", "--recurse-submodules", &from, &to]);
    let bare = place.path().join("bare.git");
    git(place.path(), &["init", "-q", "--bare", &bare.display().to_string()]);
    let work = place.path().join("work");
    committed(&work);
    git(&work, &["remote", "add", "withsub", "../aclone"]);
    let slash = format!("{}/", place.path().join("bare").display());
    git(&work, &["remote", "add", "slash", &slash]);
    let covered = git_subcommand_rules(&work, &["fetch", "push"]);
    assert!(auto_lifts(&covered, "git fetch withsub"));
    assert!(auto_lifts(&covered, "git push slash main"));
}

/// Submodules nested deeper than the checks go keep a rule from covering git outside
/// the sandbox (what is not checked is a risk); three levels are covered.
#[test]
fn submodules_nested_deeper_than_checked_are_not_covered() {
    let place = unconfined::unconfined_scratch();
    // e inside d inside c inside b inside a: d is three levels below a.
    let names = ["e", "d", "c", "b", "a"];
    committed(&place.path().join(names[0]));
    for pair in names.windows(2) {
        let (inner, outer) = (place.path().join(pair[0]), place.path().join(pair[1]));
        committed(&outer);
        git(&outer, &["submodule", "add", "-q", &inner.display().to_string(), pair[0]]);
        git(&outer, &["commit", "-q", "-m", pair[0]]);
    }
    let clone = |from: &str, to: &str| {
        let (from, to) = (place.path().join(from), place.path().join(to));
        let (from, to) = (from.display().to_string(), to.display().to_string());
        git(place.path(), &["clone", "-q", "--recurse-submodules", &from, &to]);
    };
    clone("a", "deep");
    clone("b", "shallow");
    let deep = git_subcommand_rules(&place.path().join("deep"), &["commit"]);
    assert!(!auto_lifts(&deep, "git commit -q -m x"));
    let shallow = git_subcommand_rules(&place.path().join("shallow"), &["commit"]);
    assert!(auto_lifts(&shallow, "git commit -q -m x"));
}
