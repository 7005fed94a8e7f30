//! Helpers for the permission tests: a policy on `/w`, a shell call judged in a mode, a
//! fresh git repository, and what a git rule must not cover.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kestrel_protocol::Mode;
use kestrel_tools::Unconfined;
use kestrel_tools::permission::{AllowList, Assessment, PermissionPolicy, SandboxStatus, analyze};
use serde_json::json;
use std::path::{Path, PathBuf};

pub fn read_only(line: &str) -> bool {
    analyze(line, Path::new("/w")).is_read_only()
}

pub fn policy(sandbox: bool) -> PermissionPolicy {
    let status = if sandbox {
        SandboxStatus::Available { description: "test sandbox".into() }
    } else {
        SandboxStatus::Unavailable { reason: "no Landlock, no bwrap".into() }
    };
    PermissionPolicy::new(PathBuf::from("/w"), status, AllowList::new())
}

pub fn shell(command: &str) -> String {
    json!({ "command": command }).to_string()
}

pub fn assess_shell(policy: &PermissionPolicy, mode: Mode, command: &str) -> Assessment {
    policy.assess(mode, "shell", &shell(command), false)
}

/// Whether auto runs `line` in the sandbox widened by the allow rules (they cover it);
/// panics unless auto runs it at all, sandboxed.
pub fn auto_lifts(policy: &PermissionPolicy, line: &str) -> bool {
    let (assessment, unconfined) =
        policy.assess_confinement(Mode::Auto, "shell", &shell(line), false);
    assert_eq!(assessment, Assessment::Allow { run_as: Mode::Auto }, "{line}");
    match unconfined {
        Unconfined::Lifted(_) => true,
        Unconfined::No => false,
        other => panic!("{line}: {other:?}"),
    }
}

/// A fresh git repository in a temporary directory: git rules cover only commands in
/// the workspace's own repository.
pub fn repository() -> tempfile::TempDir {
    let work = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(work.path())
        .status()
        .unwrap();
    assert!(status.success());
    work
}

/// A policy for the repository `work` with a rule `git NAME` for each of `subcommands`.
pub fn git_subcommand_rules(work: &Path, subcommands: &[&str]) -> PermissionPolicy {
    let rules: Vec<String> = subcommands.iter().map(|name| format!("git {name}")).collect();
    PermissionPolicy::new(
        work.to_path_buf(),
        SandboxStatus::Available { description: "x".into() },
        AllowList::from_config(&rules, &[]),
    )
}

/// Each of `lines` runs sandboxed in auto and is asked in ask under `covered`, and
/// without rules only "allow once" is offered for it.
pub fn assert_not_covered(covered: &PermissionPolicy, lines: &[&str]) {
    let bare = git_subcommand_rules(Path::new("/w"), &[]);
    let mut failures = Vec::new();
    for &line in lines {
        if auto_lifts(covered, line) {
            failures.push(format!("auto lifts the sandbox for {line:?}"));
        }
        match assess_shell(covered, Mode::Ask, line) {
            Assessment::Ask { .. } => {}
            other => failures.push(format!("ask: {line:?}: {other:?}")),
        }
        match assess_shell(&bare, Mode::Ask, line) {
            Assessment::Ask { always, .. } if always.is_empty() => {}
            other => failures.push(format!("a rule is offered for {line:?}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
