//! A shell line the allow rules cover. In auto it runs unasked but in the sandbox: only
//! the `allow_write` places its redirections write are added, `.git` stays read-only,
//! and what it starts ends with it. In ask it runs outside the sandbox, its git in the
//! repository the
//! session pinned, whatever git would find when it runs: a `.git` a sandboxed process
//! made meanwhile (hooks and all) is never used, and a pinned repository that was
//! replaced stops the line. A repository whose hooks sandboxed commands can write
//! (`core.hooksPath` into the working tree, as husky sets it) gets nothing from a rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::permission::{git_subcommand_rules, repository};
use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use kestrel_tools::permission::{
    AllowList, Assessment, PermissionPolicy, PinnedRepository, SandboxStatus, workspace_repository,
};
use kestrel_tools::{Lift, ToolContext, Unconfined};
use serde_json::json;
use std::path::Path;

#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git").args(args).current_dir(dir).output().unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

fn pinned(dir: &Path) -> PinnedRepository {
    let home = tempfile::tempdir().unwrap();
    let home = kestrel_store::KestrelHome::at(home.path());
    PinnedRepository::from_record(&workspace_repository(dir, &home)).unwrap()
}

/// A context for a line the rules let out, pinned to `repository`.
fn covered(work: &Path, repository: PinnedRepository) -> ToolContext {
    ToolContext {
        unconfined: Unconfined::ByRules { repository: Some(repository) },
        ..context(work, Mode::Ask)
    }
}

/// A repository at `dir` whose pre-commit hook touches `marker`.
fn planted(dir: &Path, marker: &Path) {
    git(dir, &["init", "-q"]);
    let hook = dir.join(".git/hooks/pre-commit");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn git_in_a_covered_line_runs_in_the_pinned_repository_not_one_made_since() {
    let work = repository();
    git(work.path(), &["config", "user.name", "T"]);
    git(work.path(), &["config", "user.email", "t@example.org"]);
    let pin = pinned(work.path());
    // Made after the line was judged, as a sandboxed background process could.
    let out = unconfined::unconfined_scratch();
    let marker = out.path().join("hook-ran");
    std::fs::create_dir(work.path().join("sub")).unwrap();
    planted(&work.path().join("sub"), &marker);
    let line = "cd sub && git rev-parse --absolute-git-dir && git commit -q --allow-empty -m x";
    let output =
        call(&covered(work.path(), pin.clone()), "shell", json!({ "command": line })).await;
    let text = ok(&output);
    assert!(text.contains(&pin.git_dir.display().to_string()), "{text}");
    assert!(!marker.exists(), "the planted repository's hook ran: {text}");
    assert_eq!(git(work.path(), &["log", "--format=%s"]), "x");
    // Programs the line starts see git as usual (a test suite's own repositories).
    let line = "cd sub && bash -c 'git rev-parse --absolute-git-dir'";
    let output = call(&covered(work.path(), pin), "shell", json!({ "command": line })).await;
    let sub = work.path().join("sub/.git").canonicalize().unwrap();
    assert!(ok(&output).contains(&sub.display().to_string()), "{}", output.content);
}

#[tokio::test]
async fn a_covered_line_does_not_run_when_the_pinned_repository_was_replaced() {
    let work = repository();
    let pin = pinned(work.path());
    std::fs::rename(work.path().join(".git"), work.path().join("old.git")).unwrap();
    git(work.path(), &["init", "-q"]);
    let output = call(&covered(work.path(), pin), "shell", json!({ "command": "touch ran" })).await;
    assert!(err(&output).contains("no longer the directory"), "{}", output.content);
    assert!(!work.path().join("ran").exists());
}

/// A repository in a temp dir with a committer, and its pin.
fn committing_repository() -> (tempfile::TempDir, PinnedRepository) {
    let work = repository();
    git(work.path(), &["config", "user.name", "T"]);
    git(work.path(), &["config", "user.email", "t@example.org"]);
    let pin = pinned(work.path());
    (work, pin)
}

/// An auto context for a line the rules cover, with `lift`.
fn lifted(work: &Path, lift: Lift) -> ToolContext {
    ToolContext { unconfined: Unconfined::Lifted(lift), ..context(work, Mode::Auto) }
}

/// What auto gives a line under `policy`.
fn auto(policy: &PermissionPolicy, line: &str) -> Unconfined {
    let line = json!({ "command": line }).to_string();
    let (assessment, unconfined) = policy.assess_confinement(Mode::Auto, "shell", &line, false);
    assert_eq!(assessment, Assessment::Allow { run_as: Mode::Auto });
    unconfined
}

/// In auto a git rule runs its line unasked but sandboxed: `.git` stays read-only and
/// the network off, and the failure says why and what the user can do.
#[tokio::test]
async fn a_git_rule_in_auto_keeps_the_line_in_the_sandbox_and_says_what_to_do() {
    let (work, _) = committing_repository();
    let policy = git_subcommand_rules(work.path(), &["commit", "push"]);
    for line in ["git commit -m x", "git status && git commit -m x", "git push"] {
        assert_eq!(auto(&policy, line), Unconfined::Lifted(Lift::default()), "{line}");
    }
    let commit = json!({ "command": "git commit -q --allow-empty -m x" });
    err(&call(&lifted(work.path(), Lift::default()), "shell", commit).await);
    assert!(git(work.path(), &["rev-list", "--all"]).is_empty(), "nothing was committed");
    let note = PermissionPolicy::lifted_note(&Lift::default());
    assert!(note.contains("does not make `.git` writable") && note.contains("ask mode"), "{note}");
    // No rule: nothing.
    assert_eq!(auto(&policy, "git tag v1"), Unconfined::No);
}

/// An `allow_write` place a covered redirection writes is writable for its line.
#[tokio::test]
async fn an_allow_write_place_a_covered_line_writes_is_writable_for_it() {
    let work = tempfile::tempdir().unwrap();
    let out = unconfined::unconfined_scratch();
    let target = out.path().join("report.txt");
    let rules = ["echo done".to_string()];
    let policy = PermissionPolicy::new(
        work.path().to_path_buf(),
        SandboxStatus::Available { description: "x".into() },
        AllowList::from_config(&rules, std::slice::from_ref(&out.path().to_path_buf())),
    );
    let line = format!("echo done > {}", target.display());
    let Unconfined::Lifted(lift) = auto(&policy, &line) else { panic!("not covered") };
    assert_eq!(lift.writable, [out.path().canonicalize().unwrap()]);
    // Without the lift the sandbox refuses the write.
    err(&call(&context(work.path(), Mode::Auto), "shell", json!({ "command": line })).await);
    ok(&call(&lifted(work.path(), lift.clone()), "shell", json!({ "command": line })).await);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "done\n");
    // A repository in that place keeps its `.git` read-only.
    git(out.path(), &["init", "-q"]);
    let hook = out.path().join(".git/hooks/pre-commit");
    let line = format!("echo 'touch /x' > {}", hook.display());
    err(&call(&lifted(work.path(), lift), "shell", json!({ "command": line })).await);
    assert!(!hook.exists());
    // A write the sandbox allows anyway (in the workspace) widens nothing.
    let policy = PermissionPolicy::new(
        work.path().to_path_buf(),
        SandboxStatus::Available { description: "x".into() },
        AllowList::from_config(&rules, &[std::path::PathBuf::from("/")]),
    );
    let inside = format!("echo done > {}", work.path().join("notes.txt").display());
    assert_eq!(auto(&policy, &inside), Unconfined::Lifted(Lift::default()));
}

#[test]
fn hooks_that_sandboxed_commands_can_write_keep_git_in_the_sandbox() {
    let work = repository();
    let policy = git_subcommand_rules(work.path(), &["commit"]);
    let line = json!({ "command": "git commit -m x" }).to_string();
    let (assessment, unconfined) = policy.assess_confinement(Mode::Ask, "shell", &line, false);
    assert_eq!(assessment, Assessment::Allow { run_as: Mode::Ask });
    assert!(matches!(unconfined, Unconfined::ByRules { repository: Some(_) }), "{unconfined:?}");
    assert!(matches!(auto(&policy, "git commit -m x"), Unconfined::Lifted(_)));
    // husky: hooks in the working tree, which the sandbox lets commands write.
    git(work.path(), &["config", "core.hooksPath", ".husky"]);
    let (assessment, unconfined) = policy.assess_confinement(Mode::Ask, "shell", &line, false);
    assert!(matches!(assessment, Assessment::Ask { .. }), "{assessment:?}");
    assert_eq!(unconfined, Unconfined::No);
    assert_eq!(auto(&policy, "git commit -m x"), Unconfined::No);
    // Reading commands never run those hooks: still read-only.
    let status = json!({ "command": "git status" }).to_string();
    let (assessment, _) = policy.assess_confinement(Mode::ReadOnly, "shell", &status, false);
    assert_eq!(assessment, Assessment::Allow { run_as: Mode::ReadOnly });
}

#[test]
fn a_line_that_makes_a_repository_and_uses_one_is_not_covered() {
    let work = repository();
    let policy = git_subcommand_rules(work.path(), &["init", "commit"]);
    let judge = |line: &str| {
        let line = json!({ "command": line }).to_string();
        policy.assess_confinement(Mode::Ask, "shell", &line, false).1
    };
    // Pinned to the workspace's repository, `git init` would reinitialise it.
    assert_eq!(judge("git init && git commit -m x"), Unconfined::No);
    assert_eq!(judge("git init"), Unconfined::ByRules { repository: None });
    // In auto nothing is pinned: it runs unasked, sandboxed.
    let sandboxed = Unconfined::Lifted(Lift::default());
    assert_eq!(auto(&policy, "git init && git commit -m x"), sandboxed);
}

#[test]
fn a_line_kept_in_the_sandbox_says_which_part_no_rule_covers() {
    let work = repository();
    let policy = git_subcommand_rules(work.path(), &["commit"]);
    let note = |line: &str| policy.sandbox_note(&json!({ "command": line }).to_string());
    let text = note("sed -i s/a/b/ f && git commit -m x").unwrap();
    assert!(text.contains("`sed -i s/a/b/ f`") && text.contains("no rule covers it"), "{text}");
    assert!(!text.contains("`git commit -m x`"), "{text}");
    // A rule matches, but the repository is not the one the session began with.
    std::fs::create_dir(work.path().join("sub")).unwrap();
    git(&work.path().join("sub"), &["init", "-q"]);
    let text = note("cd sub && git commit -m x").unwrap();
    assert!(text.contains("not the one the session began with"), "{text}");
    // Nothing a rule touches: nothing to say.
    assert_eq!(note("sed -i s/a/b/ f"), None);
    // Everything covered: lifted (its note is `lifted_note`).
    assert_eq!(note("git commit -m x"), None);
}

#[tokio::test]
async fn what_a_lifted_line_leaves_running_ends_with_it() {
    let work = tempfile::tempdir().unwrap();
    let line = "setsid -f sh -c 'while :; do echo x >> tick; sleep 0.05; done' \
                </dev/null >/dev/null 2>&1; until [ -s tick ]; do sleep 0.05; done";
    ok(&call(&lifted(work.path(), Lift::default()), "shell", json!({ "command": line })).await);
    let tick = work.path().join("tick");
    let size = || std::fs::metadata(&tick).unwrap().len();
    let before = size();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(size(), before, "a process the lifted line left keeps running");
}
