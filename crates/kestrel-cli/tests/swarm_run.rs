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
    let status = stdout(&test.swarm(&["status"]));
    assert!(status.contains("done") && status.contains("greet"), "{status}");
    assert!(status.contains("by role: implementer"), "{status}");
    // Worktrees are cleaned after a run that merged everything.
    let worktrees = git(test.repo.path(), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
}

const FOUR_TASKS: &str = r#"
goal = "A versioned library with a colour"

[[task]]
id = "one"
title = "Version file"
description = "lib.txt holds the version v1."
acceptance = ["grep -qx v1 lib.txt"]

[[task]]
id = "two"
title = "Second line"
depends_on = ["one"]
acceptance = ["grep -qx v1 lib.txt", "grep -qx two lib.txt"]

[[task]]
id = "left"
title = "Red"
depends_on = ["two"]
acceptance = ["grep -q red shared.txt"]

[[task]]
id = "right"
title = "Blue"
depends_on = ["two"]
acceptance = ["grep -q blue shared.txt"]
"#;

/// The story of ARCHITECTURE §10 on a toy repository: a chain (`one` → `two`) and a
/// pair (`left`, `right`) editing one line both ways. `one`'s first verification fails,
/// `two`'s first review rejects, the pair's second merge conflicts and is resolved, and
/// the orchestrator is killed mid-run and resumed.
#[test]
fn a_graph_with_a_failed_verification_a_rejection_and_a_conflict_ends_merged_after_a_kill_and_resume()
 {
    let mut steps = Vec::new();
    steps.extend(implement("one", &[("lib.txt", "v0\n")]));
    steps.extend(implement("one", &[("lib.txt", "v1\n")]));
    steps.extend(review("one", 1, true, &[]));
    steps.extend(review("one", 2, true, &[]));
    steps.extend(implement("two", &[("lib.txt", "v1\ntwo\n")]));
    steps.extend(review("two", 1, false, &["say so in the README"]));
    steps.extend(implement("two", &[("README", "toy\ntwo\n")]));
    steps.extend(review("two", 2, true, &[]));
    for (task, colour) in [("left", "red"), ("right", "blue")] {
        steps.extend(implement(task, &[("shared.txt", &format!("color = {colour}\n"))]));
        // Used by whichever of the pair merges second: its conflict, resolved.
        steps.extend(implement(task, &[("shared.txt", "color = red blue\n")]));
        steps.extend(review(task, 1, true, &[]));
        steps.extend(review(task, 2, true, &[]));
    }
    let files = [("README", "toy\n"), ("shared.txt", "color = none\n")];
    let test = SwarmTest::new(&files, steps, "");
    let graph = test.graph(FOUR_TASKS);

    let mut first = test
        .command(&["swarm", "run", "--graph", &graph])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    test.wait_for_event("task two committed", |event| {
        event["type"] == "committed" && event["task"] == "two"
    });
    first.kill().unwrap();
    first.wait().unwrap();

    let run = test.run_id();
    let output = test.swarm(&["resume", &run[..8]]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");

    let branch = format!("kestrel/{run}");
    let show = |file: &str| git(test.repo.path(), &["show", &format!("{branch}:{file}")]);
    assert_eq!(show("lib.txt"), "v1\ntwo\n");
    assert_eq!(show("README"), "toy\ntwo\n");
    assert_eq!(show("shared.txt"), "color = red blue\n");
    // Every acceptance command passes on the integration branch.
    let check = tempfile::tempdir().unwrap();
    git(
        check.path(),
        &["clone", "-q", "--branch", &branch, &test.repo.path().display().to_string(), "."],
    );
    for command in [
        "grep -qx v1 lib.txt",
        "grep -qx two lib.txt",
        "grep -q red shared.txt",
        "grep -q blue shared.txt",
    ] {
        let status = std::process::Command::new("bash")
            .args(["-c", command])
            .current_dir(check.path())
            .status()
            .unwrap();
        assert!(status.success(), "{command}");
    }
    // Each task merged exactly once.
    let log = git(
        test.repo.path(),
        &[
            "log",
            "--merges",
            "--first-parent",
            "--format=%(trailers:key=Kestrel-Swarm,valueonly)",
            &branch,
        ],
    );
    for task in ["one", "two", "left", "right"] {
        let merges = log.lines().filter(|line| line.starts_with(&format!("{run}/{task}/"))).count();
        assert_eq!(merges, 1, "{task} merged once: {log}");
    }

    let events = test.events(&run);
    let failed = |task: &str, stage: &str| {
        events
            .iter()
            .filter(|e| e["type"] == "attempt_failed" && e["task"] == task && e["stage"] == stage)
            .count()
    };
    assert_eq!(failed("one", "verify"), 1, "{events:#?}");
    assert_eq!(failed("two", "review"), 1, "{events:#?}");
    assert_eq!(failed("left", "merge") + failed("right", "merge"), 1, "{events:#?}");
    let verdicts: Vec<bool> = events
        .iter()
        .filter(|e| e["type"] == "reviewed" && e["task"] == "two")
        .map(|e| e["approve"].as_bool().unwrap())
        .collect();
    assert_eq!(verdicts, [false, true]);
    assert!(events.iter().any(|e| e["type"] == "run_resumed"));
    assert_eq!(events.last().unwrap()["type"], "run_finished");
    assert_eq!(events.last().unwrap()["state"], "done");
    // The order of the story: one merged before two started, two before the pair.
    let position = |kind: &str, task: &str| {
        events.iter().position(|e| e["type"] == kind && e["task"] == task).unwrap()
    };
    assert!(position("merged", "one") < position("attempt_started", "two"));
    assert!(position("merged", "two") < position("attempt_started", "left"));
    assert!(position("merged", "two") < position("attempt_started", "right"));
    // No turn was sent twice: only the unused conflict steps of the pair's first merge
    // are left (its second implementer turn and second review: 4 steps).
    assert_eq!(test.server.remaining(), 4, "steps left: {}", test.server.remaining());
    let worktrees = git(test.repo.path(), &["worktree", "list"]);
    assert_eq!(worktrees.lines().count(), 1, "{worktrees}");
    assert!(!swarm_support::run_workdir(&test, &run).exists());
}

/// Two tasks that pass alone and fail together: the second merge's check on the
/// integration branch fails, the merge is undone, and the task gets it back with the
/// integration branch merged into its worktree.
#[test]
fn a_merge_that_breaks_the_integration_branch_is_undone_and_sent_back() {
    let gate = tempfile::tempdir().unwrap();
    let go = gate.path().join("go");
    let graph_text = format!(
        r#"
[[task]]
id = "a"
title = "Add a.txt"
acceptance = ["test -f a.txt"]

[[task]]
id = "b"
title = "Add b.txt, compatible with a.txt"
acceptance = ["while [ ! -e {go} ]; do sleep 0.05; done; test -f b.txt && {{ test ! -f a.txt || grep -q patched a.txt; }}"]
"#,
        go = go.display()
    );
    let mut steps = implement("a", &[("a.txt", "plain\n")]);
    steps.extend(review("a", 1, true, &[]));
    steps.extend(implement("b", &[("b.txt", "b\n")]));
    steps.extend(review("b", 1, true, &[]));
    steps.extend(implement("b", &[("a.txt", "patched\n")]));
    steps.extend(review("b", 2, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let graph = test.graph(&graph_text);
    let orchestrator = test
        .command(&["swarm", "run", "--graph", &graph])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // b's verification waits until a is merged: b then merges second.
    test.wait_for_event("a merged", |e| e["type"] == "merged" && e["task"] == "a");
    std::fs::write(&go, "").unwrap();
    let output = orchestrator.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let run = test.run_id();
    let events = test.events(&run);
    let integrate: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "attempt_failed" && e["stage"] == "integrate")
        .collect();
    assert_eq!(integrate.len(), 1, "{events:#?}");
    assert_eq!(integrate[0]["task"], "b");
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:a.txt")]), "patched\n");
    let trailers = git(
        test.repo.path(),
        &[
            "log",
            "--merges",
            "--first-parent",
            "--format=%(trailers:key=Kestrel-Swarm,valueonly)",
            &branch,
        ],
    );
    let merges: Vec<&str> = trailers.lines().filter(|line| !line.is_empty()).collect();
    assert_eq!(merges, [format!("{run}/b/2"), format!("{run}/a/1")], "the undone merge is gone");
}
