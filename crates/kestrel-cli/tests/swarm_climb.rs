//! `kestrel swarm climb` through the binary, with the scripted model: a toy repository
//! whose metric (a sum of three files) is deterministic; the planner proposes four
//! experiments — one improves, one regresses, one breaks the check, one changes nothing
//! measurable. Only the improvement is merged and climb.md says why for each; a review
//! rejects before measuring; bad input exits 2 with nothing started. Kill and resume are
//! in swarm_climb_resume.rs, Ctrl+C, cancel, the budget and scheduling in
//! swarm_climb_control.rs; the toy repository and script in swarm_support/climb.rs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use kestrel_testkit::Step;
use serde_json::{Value, json};
use std::path::Path;
use swarm_support::climb::{
    METRIC, assert_only_the_improvement_merged, climb_args, config_with_roles, decisions, expected,
    experiment, files, one_args, propose, run_dir, script,
};
use swarm_support::{PLANNER, SwarmTest, git, implement, of_type, review, stderr};

#[test]
fn climb_keeps_only_the_improvement_and_says_why_for_each() {
    let test = SwarmTest::new(&files(), script(), "");
    let output = test.swarm_within(&climb_args());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(decisions(&events), expected());
    // The baseline's path: 100 at the start, 80 after `faster`.
    let baselines: Vec<Value> =
        of_type(&events, "baseline_measured").iter().map(|e| e["values"].clone()).collect();
    assert_eq!(baselines, [json!([100.0, 100.0]), json!([80.0, 80.0])]);
    let finished = of_type(&events, "run_finished");
    assert_eq!(finished.last().unwrap()["state"], "done");
    assert_only_the_improvement_merged(&test, &run);
    let land = format!("merge kestrel/{run}");
    assert!(stderr(&output).contains("; land it with: git -C "), "{}", stderr(&output));
    assert!(stderr(&output).contains(&land), "{}", stderr(&output));

    // The report says why for each, with both sides' numbers; the plot has two points.
    let report = std::fs::read_to_string(run_dir(&test, &run).join("climb.md")).unwrap();
    for (id, decision) in expected() {
        assert!(report.contains(&format!("- **{id}** — {decision}: ")), "{id}: {report}");
    }
    // `slower` was measured against 100 or, after `faster`, against 80: 20 worse either way.
    let slower = report.lines().find(|line| line.starts_with("| `slower` |")).unwrap();
    assert!(
        slower.contains("| 100 ±0 | 120 ±0 |") || slower.contains("| 80 ±0 | 100 ±0 |"),
        "{slower}"
    );
    assert!(report.contains("acceptance command `sh check.sh` exited with 1"), "{report}");
    assert!(report.contains("1 file(s) +1 −1"), "{report}");
    let svg = std::fs::read_to_string(run_dir(&test, &run).join("climb.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.matches("<circle").count() == 2, "{svg}");
    // Every experiment's diff is kept, a check-failed one's too.
    let diff = std::fs::read_to_string(run_dir(&test, &run).join("logs/slower.diff")).unwrap();
    assert!(diff.contains("+50"), "{diff}");
    let diff = std::fs::read_to_string(run_dir(&test, &run).join("logs/broken.diff")).unwrap();
    assert!(diff.contains("+gone"), "{diff}");
    let broken = report.lines().find(|line| line.starts_with("| `broken` |")).unwrap();
    assert!(broken.contains("1 file(s) +1 −1"), "{broken}");

    // status: the climb as JSON and as a table.
    let status = test.status_json(&run);
    let climb = &status["climb"];
    assert_eq!(climb["direction"], "lower");
    let by_id = |id: &str| {
        climb["experiments"].as_array().unwrap().iter().find(|e| e["id"] == id).unwrap().clone()
    };
    assert_eq!(by_id("faster")["decision"], "kept");
    assert_eq!(by_id("faster")["merged"], true);
    assert_eq!(by_id("faster")["median"], 80.0);
    assert_eq!(by_id("faster")["baseline_median"], 100.0);
    let slower = by_id("slower");
    assert_eq!(
        slower["median"].as_f64().unwrap() - slower["baseline_median"].as_f64().unwrap(),
        20.0
    );
    assert_eq!(by_id("broken")["median"], Value::Null);
    assert_eq!(by_id("broken")["diff"], json!({"files": 1, "insertions": 1, "deletions": 1}));
    // The planner was offered swarm_experiments, not swarm_plan.
    let planner = test.requests_for(PLANNER);
    let tools: Vec<String> = planner[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(tools.contains(&"swarm_experiments".to_string()), "{tools:?}");
    assert!(!tools.contains(&"swarm_plan".to_string()), "{tools:?}");
    let table = test.swarm_within(&["status", &run]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.contains("climb `sh metric.sh` (lower is better): baseline 100 → 80"), "{table}");
    assert!(table.contains("faster: kept: "), "{table}");
}

/// `kestrel swarm ARGS` in `dir` (not the repository).
fn swarm_in(test: &SwarmTest, dir: &Path, args: &[&str]) -> std::process::Output {
    let mut command = test.command(&[&["swarm"], args].concat());
    command.current_dir(dir);
    test.output_within(command)
}

#[test]
fn bad_input_exits_2_naming_the_problem_with_nothing_started() {
    let test = SwarmTest::new(&files(), Vec::new(), "");
    let repo = test.repo.path().to_path_buf();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["climb", "--direction", "lower", "--yes"], "--metric"),
        (vec!["climb", "--metric", METRIC, "--direction", "up", "--yes"], "expected `lower`"),
        (vec!["climb", "--metric", METRIC, "--yes"], "--direction"),
        (
            vec!["climb", "--metric", METRIC, "--direction", "lower", "--runs", "0", "--yes"],
            "at least 2 runs",
        ),
        (
            vec!["climb", "--metric", METRIC, "--direction", "lower", "--runs", "1", "--yes"],
            "at least 2 runs",
        ),
        (vec!["climb", "--metric", METRIC, "--direction", "lower"], "pass --yes"),
    ];
    for (args, says) in cases {
        let output = swarm_in(&test, &repo, &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(says), "{args:?}: {}", stderr(&output));
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let output = swarm_in(
        &test,
        elsewhere.path(),
        &["climb", "--metric", METRIC, "--direction", "lower", "--yes"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("is not in a git repository"), "{}", stderr(&output));
    assert!(test.run_ids().is_empty(), "nothing was started");
    assert_eq!(test.branches(), ["main"]);
    assert!(test.model_requests().is_empty());
}

#[test]
fn a_metric_that_prints_no_number_fails_the_baseline_and_merges_nothing() {
    let test = SwarmTest::new(&files(), Vec::new(), "");
    let output =
        test.swarm_within(&["climb", "--metric", "echo fast", "--direction", "lower", "--yes"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(text.contains("the baseline could not be measured"), "{text}");
    assert!(text.contains("printed no number: its last line is `fast`"), "{text}");
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(of_type(&events, "baseline_failed").len(), 1);
    assert_eq!(of_type(&events, "run_finished")[0]["state"], "failed");
    assert!(of_type(&events, "merged").is_empty());
    let merges = git(test.repo.path(), &["rev-list", "--merges", &format!("main..kestrel/{run}")]);
    assert!(merges.trim().is_empty(), "{merges}");
    assert_nothing_to_land(&output);
    assert!(test.model_requests().is_empty(), "no planner without a baseline");
    let status = test.status_json(&run);
    assert!(status["climb"]["baseline_failure"].as_str().unwrap().contains("printed no number"));
}

#[test]
fn with_review_a_rejected_experiment_is_never_measured() {
    let mut steps = propose(&[
        experiment("faster", "a.txt costs less when it holds 30"),
        experiment("slower", "b.txt at 50 looks simpler"),
    ]);
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement("slower", &[("b.txt", "50\n")]));
    steps.extend(review("faster", 1, true, &[]));
    steps.extend(review("slower", 1, false, &["b.txt grows the sum"]));
    let test = SwarmTest::new(&files(), steps, "");
    let output = test.swarm_within(&[
        "climb",
        "--metric",
        METRIC,
        "--direction",
        "lower",
        "--experiments",
        "2",
        "--runs",
        "2",
        "--review",
        "--yes",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(
        decisions(&events),
        [
            ("faster".to_string(), "kept".to_string()),
            ("slower".to_string(), "rejected".to_string())
        ]
    );
    let rejected = of_type(&events, "experiment_decided")
        .into_iter()
        .find(|e| e["task"] == "slower")
        .unwrap()
        .clone();
    assert!(rejected["reason"].as_str().unwrap().contains("b.txt grows the sum"), "{rejected}");
    assert!(rejected.get("values").is_none(), "never measured: {rejected}");
    assert!(!run_dir(&test, &run).join("logs/slower-measure.log").exists());
    // Its diff is kept all the same.
    let diff = std::fs::read_to_string(run_dir(&test, &run).join("logs/slower.diff")).unwrap();
    assert!(diff.contains("+50"), "{diff}");
    assert_eq!(rejected["diff"], json!({"files": 1, "insertions": 1, "deletions": 1}));
    // The reviewer saw the experiment's diff.
    let reviews = test.requests_for(swarm_support::REVIEWER);
    assert!(reviews.iter().any(|body| body.to_string().contains("+50")), "{reviews:?}");
}

/// Without --review a climb needs no reviewer: one model for every role is enough. With
/// --review the reviewer must be another model.
#[test]
fn a_climb_without_review_needs_no_separate_reviewer_model() {
    let test = SwarmTest::new(&files(), Vec::new(), "");
    config_with_roles(&test, "");
    let mut args = one_args();
    args.extend(["--max-cost", "0"]);
    let output = test.swarm_within(&args);
    // It started: the baseline was measured, then the budget stopped it before a turn.
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let run = test.run_id();
    assert_eq!(of_type(&test.events(&run), "baseline_measured").len(), 1);
    args.push("--review");
    let output = test.swarm_within(&args);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("a review needs another model"), "{}", stderr(&output));
    assert_eq!(test.run_ids().len(), 1, "nothing more started");
}

/// An implementer whose turn fails after writing: `build_failed`, and what it wrote is
/// committed on its branch and kept as `logs/<id>.diff`.
#[test]
fn a_failed_build_keeps_its_diff() {
    let when = "task=faster role=implementer";
    let mut steps = propose(&[experiment("faster", "a.txt costs less when it holds 30")]);
    steps.extend([
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "30\n"}))
            .when(Some(swarm_support::IMPLEMENTER), Some(when)),
        Step::text("never")
            .with_fault(kestrel_testkit::Fault::Status {
                status: 400,
                retry_after_secs: None,
                message: Some("bad request".into()),
                times: Some(100),
            })
            .when(Some(swarm_support::IMPLEMENTER), Some(when)),
    ]);
    let test = SwarmTest::new(&files(), steps, "");
    let output = test.swarm_within(&one_args());
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    let decided = of_type(&events, "experiment_decided");
    assert_eq!(decided.len(), 1, "{events:#?}");
    assert_eq!(decided[0]["decision"], "build_failed");
    assert!(decided[0]["reason"].as_str().unwrap().contains("turn failed"), "{}", decided[0]);
    assert_eq!(decided[0]["diff"], json!({"files": 1, "insertions": 1, "deletions": 1}));
    let diff = std::fs::read_to_string(run_dir(&test, &run).join("logs/faster.diff")).unwrap();
    assert!(diff.contains("+30"), "{diff}");
    // Its only experiment failed: nothing was merged, so there is nothing to land.
    assert!(of_type(&events, "merged").is_empty());
    assert_eq!(of_type(&events, "run_finished")[0]["land"], "nothing to land");
    assert_nothing_to_land(&output);
}

/// The closing line of a climb that merged nothing says so, with no `git merge` to run.
fn assert_nothing_to_land(output: &std::process::Output) {
    let text = stderr(output);
    assert!(text.contains("; nothing was merged, nothing to land"), "{text}");
    assert!(!text.contains("land it with"), "{text}");
}

#[test]
fn more_bad_input_exits_2_with_nothing_started() {
    let test = SwarmTest::new(&files(), Vec::new(), "");
    let repo = test.repo.path().to_path_buf();
    let climb = |extra: &[&'static str]| -> Vec<&'static str> {
        let mut args = vec!["climb", "--metric", METRIC, "--direction", "lower", "--yes"];
        args.extend_from_slice(extra);
        args
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["climb", "--metric", " ", "--direction", "lower", "--yes"], "--metric is empty"),
        (climb(&["--check", " "]), "--check ` ` is empty"),
        (climb(&["--experiments", "0"]), "--experiments"),
    ];
    for (args, says) in cases {
        let output = swarm_in(&test, &repo, &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains(says), "{args:?}: {}", stderr(&output));
    }
    // A detached HEAD.
    git(&repo, &["checkout", "-q", "--detach"]);
    let output = swarm_in(&test, &repo, &climb(&[]));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("HEAD is not on a branch"), "{}", stderr(&output));
    git(&repo, &["checkout", "-q", "main"]);
    // A branch with no commit yet.
    let unborn = tempfile::tempdir().unwrap();
    git(unborn.path(), &["init", "-q", "-b", "fresh"]);
    let output = swarm_in(&test, unborn.path(), &climb(&[]));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("`fresh` has no commit yet"), "{}", stderr(&output));
    // The ray executor.
    let roles = format!(
        "executor = \"ray\"\n\n[swarm.ray]\naddress = \"http://127.0.0.1:9\"\nremote = \"{}\"\n\n\
         [swarm.roles.reviewer]\nmodel = \"scripted/{}\"\n",
        repo.display(),
        swarm_support::REVIEWER
    );
    config_with_roles(&test, &roles);
    let output = swarm_in(&test, &repo, &climb(&[]));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("executor = \"local\""), "{}", stderr(&output));
    assert!(test.run_ids().is_empty(), "nothing was started");
    assert_eq!(test.branches(), ["main"]);

    // A check that fails on the baseline: the run ends failed before any model is asked,
    // and `retry` does not apply to it.
    test.write_config("");
    let output = swarm_in(&test, &repo, &climb(&["--check", "false"]));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("the baseline could not be measured"), "{}", stderr(&output));
    let run = test.run_id();
    assert_eq!(of_type(&test.events(&run), "run_finished")[0]["state"], "failed");
    assert!(of_type(&test.events(&run), "baseline_measured").is_empty());
    let output = test.swarm_within(&["retry", &run, "faster"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("is a climb"), "{}", stderr(&output));
    assert!(test.model_requests().is_empty());
}
