//! A shell line the allow rules cover. In auto it runs in the sandbox with what its
//! rules need lifted: the pinned repository's git directory writable but for its config
//! and hooks, the network for a command that is not a local git one; programs it starts
//! stay confined. In ask it runs outside the sandbox, its git in the repository the
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
    Assessment, PermissionPolicy, PinnedRepository, workspace_repository,
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

fn repository_lift(pin: PinnedRepository) -> Lift {
    Lift { repository: Some(pin), ..Lift::default() }
}

#[tokio::test]
async fn a_git_rule_in_auto_makes_the_repository_writable_but_not_its_config_or_hooks() {
    let (work, pin) = committing_repository();
    let commit = json!({ "command": "git commit -q --allow-empty -m x" });
    // Without the lift the sandbox keeps .git read-only.
    let output = call(&context(work.path(), Mode::Auto), "shell", commit.clone()).await;
    err(&output);
    let output = call(&lifted(work.path(), repository_lift(pin.clone())), "shell", commit).await;
    ok(&output);
    assert_eq!(git(work.path(), &["log", "--format=%s"]), "x");
    // What git outside the sandbox runs programs from stays read-only.
    for line in [
        "git config core.fsmonitor 'touch /x'",
        "echo 'touch /x' > .git/hooks/post-checkout",
        "echo '*.txt diff=x' > .git/info/attributes",
    ] {
        let output = call(
            &lifted(work.path(), repository_lift(pin.clone())),
            "shell",
            json!({ "command": line }),
        )
        .await;
        err(&output);
    }
    let config = std::fs::read_to_string(work.path().join(".git/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}");
    assert!(!work.path().join(".git/hooks/post-checkout").exists());
}

#[tokio::test]
async fn programs_a_covered_line_starts_in_auto_stay_confined() {
    let (work, pin) = committing_repository();
    // The user's own hook runs what the model wrote in the working tree (a linter, a
    // build script): it runs in the sandbox with the line.
    let out = unconfined::unconfined_scratch();
    let marker = out.path().join("hook-ran");
    let hook = work.path().join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nsh ./check.sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let check = format!("touch '{}' 2>/dev/null; echo checked > checked.txt\n", marker.display());
    std::fs::write(work.path().join("check.sh"), check).unwrap();
    let line = json!({ "command": "git commit -q --allow-empty -m x" });
    let output = call(&lifted(work.path(), repository_lift(pin)), "shell", line).await;
    ok(&output);
    assert!(work.path().join("checked.txt").exists(), "the hook ran");
    assert!(!marker.exists(), "the hook wrote outside the sandbox");
    assert_eq!(git(work.path(), &["log", "--format=%s"]), "x");
}

#[tokio::test]
async fn a_lifted_line_does_not_run_when_the_pinned_repository_was_replaced() {
    let (work, pin) = committing_repository();
    std::fs::rename(work.path().join(".git"), work.path().join("old.git")).unwrap();
    git(work.path(), &["init", "-q"]);
    let line = json!({ "command": "touch ran" });
    let output = call(&lifted(work.path(), repository_lift(pin)), "shell", line).await;
    assert!(err(&output).contains("no longer the directory"), "{}", output.content);
    assert!(!work.path().join("ran").exists());
}

#[tokio::test]
async fn a_lift_turns_the_network_on_for_the_line_only() {
    let work = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let line = json!({ "command": format!("echo hi > /dev/tcp/127.0.0.1/{port}") });
    let output = call(&context(work.path(), Mode::Auto), "shell", line.clone()).await;
    err(&output);
    let lift = Lift { network: true, ..Lift::default() };
    let output = call(&lifted(work.path(), lift), "shell", line).await;
    ok(&output);
}

/// What auto gives a line under `policy`.
fn auto(policy: &kestrel_tools::permission::PermissionPolicy, line: &str) -> Unconfined {
    let line = json!({ "command": line }).to_string();
    let (assessment, unconfined) = policy.assess_confinement(Mode::Auto, "shell", &line, false);
    assert_eq!(assessment, Assessment::Allow { run_as: Mode::Auto });
    unconfined
}

#[test]
fn auto_lifts_what_the_covered_commands_need_and_no_more() {
    let work = repository();
    let policy = git_subcommand_rules(work.path(), &["commit", "push", "init"]);
    let pin = pinned(work.path());
    let commit = Lift { repository: Some(pin.clone()), ..Lift::default() };
    assert_eq!(auto(&policy, "git commit -m x"), Unconfined::Lifted(commit.clone()));
    assert_eq!(auto(&policy, "git status && git commit -m x"), Unconfined::Lifted(commit));
    let push = Lift { repository: Some(pin), network: true, ..Lift::default() };
    let note = policy.sandbox_note(&json!({ "command": "git push" }).to_string());
    assert_eq!(auto(&policy, "git push"), Unconfined::Lifted(push), "{note:?}");
    // Making a repository needs nothing of the pinned one.
    assert_eq!(auto(&policy, "git init"), Unconfined::Lifted(Lift::default()));
    // No rule: nothing.
    assert_eq!(auto(&policy, "git tag v1"), Unconfined::No);
    // A lifted line that fails says what was lifted, and what the sandbox still refuses.
    let Unconfined::Lifted(push) = auto(&policy, "git push") else { unreachable!() };
    let note = PermissionPolicy::lifted_note(&push);
    assert!(note.contains("writable but for its config, hooks"), "{note}");
    assert!(note.contains("the network on") && note.contains("ask mode"), "{note}");
}

#[test]
fn a_git_command_writes_the_repository_only_on_a_line_of_git_commands() {
    let work = repository();
    let rules = ["git commit".to_string(), "cargo fmt".to_string()];
    let policy = kestrel_tools::permission::PermissionPolicy::new(
        work.path().to_path_buf(),
        kestrel_tools::permission::SandboxStatus::Available { description: "x".into() },
        kestrel_tools::permission::AllowList::from_config(&rules, &[]),
    );
    assert_eq!(auto(&policy, "cargo fmt && git commit -am fmt"), Unconfined::No);
    let note =
        policy.sandbox_note(&json!({ "command": "cargo fmt && git commit -am fmt" }).to_string());
    assert!(note.as_deref().unwrap_or_default().contains("run it on its own"), "{note:?}");
    // A command other than git gets neither the repository nor the network: a test or
    // a Makefile the model wrote could carry data out.
    assert_eq!(auto(&policy, "cargo fmt"), Unconfined::Lifted(Lift::default()));
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
    assert_eq!(auto(&policy, "git init && git commit -m x"), Unconfined::No);
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
    let lift = Lift { network: true, ..Lift::default() };
    ok(&call(&lifted(work.path(), lift), "shell", json!({ "command": line })).await);
    let tick = work.path().join("tick");
    let size = || std::fs::metadata(&tick).unwrap().len();
    let before = size();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(size(), before, "a process the lifted line left keeps its network");
}

#[test]
fn a_repository_that_runs_hooks_gets_nothing_from_a_git_rule_in_auto() {
    let work = repository();
    let policy = git_subcommand_rules(work.path(), &["commit"]);
    // git's samples are not hooks.
    assert!(matches!(auto(&policy, "git commit -m x"), Unconfined::Lifted(_)));
    let hook = work.path().join(".git/hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nmake lint\n").unwrap();
    assert_eq!(auto(&policy, "git commit -m x"), Unconfined::No);
    let note = policy.sandbox_note(&json!({ "command": "git commit -m x" }).to_string());
    let note = note.unwrap_or_default();
    assert!(note.contains("runs hooks (pre-commit)") && note.contains("as usual"), "{note}");
    // Hooks elsewhere (core.hooksPath) count the same.
    std::fs::remove_file(&hook).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("pre-push"), "#!/bin/sh\n").unwrap();
    let path = elsewhere.path().display().to_string();
    git(work.path(), &["config", "core.hooksPath", &path]);
    assert_eq!(auto(&policy, "git commit -m x"), Unconfined::No);
}

#[tokio::test]
async fn a_git_rule_in_a_linked_worktree_writes_it_but_not_the_other_worktrees() {
    let (main, _) = committing_repository();
    git(main.path(), &["commit", "-q", "--allow-empty", "-m", "first"]);
    let trees = tempfile::tempdir().unwrap();
    let (one, two) = (trees.path().join("one"), trees.path().join("two"));
    for tree in [&one, &two] {
        git(main.path(), &["worktree", "add", "-q", &tree.display().to_string()]);
    }
    let pin = pinned(&one);
    let commit = json!({ "command": "git commit -q --allow-empty -m in-one" });
    ok(&call(&lifted(&one, repository_lift(pin.clone())), "shell", commit).await);
    assert_eq!(git(&one, &["log", "-1", "--format=%s"]), "in-one");
    let common = main.path().join(".git/worktrees/two/commondir").canonicalize().unwrap();
    let line = json!({ "command": format!("echo /elsewhere > '{}'", common.display()) });
    err(&call(&lifted(&one, repository_lift(pin)), "shell", line).await);
    assert_eq!(std::fs::read_to_string(&common).unwrap().trim(), "../..");
}
