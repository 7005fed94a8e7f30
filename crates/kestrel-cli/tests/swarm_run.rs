//! `kestrel swarm run --graph`: tasks through implementer, reviewer and verifier,
//! merged into `kestrel/<run>`, the user's checkout untouched, the event log telling it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use swarm_support::{SwarmTest, git, implement, review, stderr, stdout};

const ONE_TASK: &str = r#"
[[task]]
id = "greet"
title = "Write the greeting"
description = "Create hello.txt saying hello."
acceptance = ["grep -qx hello hello.txt"]
"#;

#[test]
fn one_task_is_implemented_reviewed_verified_and_merged() {
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    // The user's uncommitted work is never touched.
    std::fs::write(test.repo.path().join("notes.txt"), "mine\n").unwrap();
    let main_before = git(test.repo.path(), &["rev-parse", "main"]);
    let graph = test.graph(ONE_TASK);

    let output = test.swarm(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(stdout(&output).is_empty(), "nothing on stdout without --json: {}", stdout(&output));
    let run = test.run_id();
    assert_eq!(err.lines().next(), Some(format!("kestrel swarm: run {run}").as_str()), "{err}");

    let branch = format!("kestrel/{run}");
    let merged = git(test.repo.path(), &["show", &format!("{branch}:hello.txt")]);
    assert_eq!(merged, "hello\n");
    let trailers = git(test.repo.path(), &["log", "--merges", "--format=%B", &branch]);
    assert!(trailers.contains(&format!("Kestrel-Swarm: {run}/greet/1")), "{trailers}");
    assert_eq!(git(test.repo.path(), &["rev-parse", "main"]), main_before);
    assert_eq!(std::fs::read_to_string(test.repo.path().join("notes.txt")).unwrap(), "mine\n");
    assert!(!test.repo.path().join("hello.txt").exists(), "the checkout stays as it was");
    assert!(err.contains(&format!("merge {branch}")), "the run names how to land it: {err}");

    let kinds: Vec<String> =
        test.events(&run).iter().map(|e| e["type"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "attempt_started",
            "turn_started",
            "turn_finished",
            "committed",
            "turn_started",
            "turn_finished",
            "reviewed",
            "verified",
            "merged",
            "run_finished"
        ],
        "{kinds:?}"
    );
    // Worktrees are cleaned after a run that merged everything.
    let worktrees = git(test.repo.path(), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
}
