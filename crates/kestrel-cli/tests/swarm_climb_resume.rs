//! `kestrel swarm climb` killed (a failpoint) or stopped and resumed: what was measured
//! is not measured again, a keep left unmerged or a merge whose event was lost is
//! recovered, a baseline that broke is measured again, and the planner's key is checked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use kestrel_testkit::Step;
use serde_json::Value;
use std::path::Path;
use swarm_support::climb::{
    abort_at, assert_only_the_improvement_merged, climb_args, config_with_roles, decisions,
    expected, experiment, files, one_args, one_experiment, propose, run_dir, script, spawn_with,
    two_args, with_metric,
};
use swarm_support::{
    SwarmTest, git, implement, implement_slowly, of_type, review, run_workdir, stderr,
};

#[test]
fn a_climb_killed_after_a_measurement_resumes_without_measuring_it_again() {
    let test = SwarmTest::new(&files(), script(), "");
    let run = abort_at(&test, &climb_args(), "climb-measured", &[]);
    let before = test.events(&run);
    // The check-failed one may be decided too: it is never measured.
    let measured: Vec<&Value> = of_type(&before, "experiment_decided")
        .into_iter()
        .filter(|event| event.get("values").is_some())
        .collect();
    assert_eq!(measured.len(), 1, "{before:#?}");
    let first = measured[0]["task"].as_str().unwrap().to_string();
    let log = run_dir(&test, &run).join(format!("logs/{first}-measure.log"));
    let log_before = std::fs::read_to_string(&log).unwrap();
    // Each look ran both sides K times: every run the event holds is in the log, once.
    let runs = 2 * measured[0]["values"].as_array().unwrap().len();
    assert_eq!(log_before.matches("$ sh metric.sh").count(), runs, "{log_before}");

    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(decisions(&events), expected(), "each decided once");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), log_before, "{first} measured again");
    assert_only_the_improvement_merged(&test, &run);
    assert_eq!(of_type(&events, "merged").len(), 1);
}

/// A pending experiment cancelled while no climb runs is over: the resume decides the
/// rest and ends (it used to spin on the cancelled one forever).
#[test]
fn an_experiment_cancelled_between_runs_is_not_measured_and_the_resume_ends() {
    let test = SwarmTest::new(&files(), script(), "");
    let run = abort_at(&test, &climb_args(), "climb-measured", &[]);
    let decided: Vec<String> = of_type(&test.events(&run), "experiment_decided")
        .iter()
        .map(|event| event["task"].as_str().unwrap().to_string())
        .collect();
    let graph = std::fs::read_to_string(run_dir(&test, &run).join("graph.toml")).unwrap();
    let pending = graph
        .lines()
        .filter_map(|line| line.strip_prefix("id = \""))
        .map(|rest| rest.trim_end_matches('"').to_string())
        .find(|id| !decided.contains(id))
        .expect("an experiment left to decide");
    let output = test.swarm_within(&["cancel", &run, &pending]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));

    let output = test.swarm_within(&["resume", &run]);
    let events = test.events(&run);
    assert!(output.status.code().is_some(), "{}", stderr(&output));
    let cancelled = of_type(&events, "task_cancelled");
    assert!(cancelled.iter().any(|event| event["task"] == pending.as_str()), "{events:#?}");
    let measured_pending = of_type(&events, "experiment_decided")
        .into_iter()
        .any(|event| event["task"] == pending.as_str());
    assert!(!measured_pending, "{pending} was decided after its cancel: {events:#?}");
}

fn metric_runs(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().matches("$ sh metric.sh").count()
}

/// A kill between a kept experiment's merge and its `merged` event: the resume finds the
/// merge by its trailer and credits the new baseline to it. The experiment is called
/// `baseline-1`: its logs are its own, apart from the baselines'.
#[test]
fn a_merge_whose_event_was_lost_is_credited_on_resume() {
    let test = SwarmTest::new(&files(), one_experiment("baseline-1"), "");
    let run = abort_at(&test, &one_args(), "climb-merge", &[]);
    assert!(of_type(&test.events(&run), "merged").is_empty());

    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(of_type(&events, "merged").len(), 1);
    let status = test.status_json(&run);
    let baselines = status["climb"]["baselines"].as_array().unwrap();
    assert_eq!(baselines.len(), 2, "{status:#}");
    assert_eq!(baselines[0]["after"], Value::Null);
    assert_eq!(baselines[1]["after"], "baseline-1", "{status:#}");
    assert_eq!(baselines[1]["median"], 80.0);
    let trailers = git(
        test.repo.path(),
        &[
            "log",
            "--merges",
            "--format=%(trailers:key=Kestrel-Swarm,valueonly)",
            &format!("main..kestrel/{run}"),
        ],
    );
    assert_eq!(trailers.trim(), format!("{run}/baseline-1/1"));
    let logs = run_dir(&test, &run).join("logs");
    assert_eq!(metric_runs(&logs.join("baseline-1-measure.log")), 16, "the experiment's runs");
    assert_eq!(metric_runs(&logs.join("baseline_1-measure.log")), 2, "the first baseline's");
    assert_eq!(metric_runs(&logs.join("baseline_2-measure.log")), 2, "the new baseline's");
}

/// The commit measured is the one merged: a commit added to the experiment's branch
/// after its measurement (by hand, between a kill and the resume) is not.
#[test]
fn a_kept_experiment_merges_the_commit_that_was_measured() {
    let test = SwarmTest::new(&files(), one_experiment("faster"), "");
    let run = abort_at(&test, &one_args(), "climb-measured", &[]);
    let events = test.events(&run);
    let decided = of_type(&events, "experiment_decided");
    assert_eq!(decided.len(), 1, "{events:#?}");
    assert_eq!(decided[0]["decision"], "kept");
    let measured = decided[0]["commit"].as_str().unwrap().to_string();
    let worktree = run_workdir(&test, &run).join("faster");
    std::fs::write(worktree.join("b.txt"), "0\n").unwrap();
    git(&worktree, &["commit", "-q", "-am", "not measured"]);

    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:a.txt")]), "30\n");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:b.txt")]), "30\n");
    let merged = git(test.repo.path(), &["rev-parse", &format!("{branch}^2")]);
    assert_eq!(merged.trim(), measured);
}

/// The metric failing on the baseline's side of a measurement is the baseline's fault:
/// the experiment is not decided, the run stops (exit 1) saying so, and once the metric
/// works again the resume measures it and keeps it.
#[test]
fn a_baseline_that_breaks_during_a_measurement_stops_the_run_without_blaming_the_experiment() {
    // From its 3rd run on (the first baseline took 2), the metric fails on the old a.txt
    // while a file exists.
    let files = with_metric(
        "n=$(cat \"$CLIMB_COUNT\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$CLIMB_COUNT\"\n\
         if [ -e \"$CLIMB_BREAK\" ] && [ \"$n\" -ge 2 ] && [ \"$(cat a.txt)\" = 50 ]; then exit 3; fi\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let test = SwarmTest::new(&files, one_experiment("faster"), "");
    let dir = tempfile::tempdir().unwrap();
    let (count, broken) = (dir.path().join("count"), dir.path().join("break"));
    std::fs::write(&broken, "").unwrap();
    let env = [("CLIMB_COUNT", count.as_path()), ("CLIMB_BREAK", broken.as_path())];
    let output = spawn_with(&test, &one_args(), &env).wait();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the baseline") && err.contains("failed while `faster` was measured"),
        "{err}"
    );
    assert!(err.contains("exited with 3"), "{err}");
    let run = test.run_id();
    let events = test.events(&run);
    assert!(of_type(&events, "experiment_decided").is_empty(), "{events:#?}");
    assert_eq!(of_type(&events, "baseline_failed").len(), 1);
    let status = test.status_json(&run);
    assert_eq!(status["state"], "interrupted");
    assert!(status["climb"]["baseline_failure"].as_str().unwrap().contains("faster"), "{status:#}");

    std::fs::remove_file(&broken).unwrap();
    let output = spawn_with(&test, &["resume", &run], &env).wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(decisions(&events), [("faster".to_string(), "kept".to_string())]);
    assert_eq!(test.status_json(&run)["climb"]["baseline_failure"], Value::Null);
}

/// A measurement killed after its first look goes on from it: the looks are recorded and
/// never measured again. The metric jitters (0, 1, 2 by a counter) and the experiment
/// gains 2, so one look of 3 runs a side is promising but not conclusive.
#[test]
fn a_measurement_killed_between_looks_goes_on_from_the_looks_recorded() {
    let files = with_metric(
        "n=$(cat \"$CLIMB_COUNT\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$CLIMB_COUNT\"\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) + n % 3 ))\n",
    );
    let mut steps = propose(&[experiment("faster", "a.txt costs less when it holds 48")]);
    steps.extend(implement("faster", &[("a.txt", "48\n")]));
    let test = SwarmTest::new(&files, steps, "");
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    // 3 runs a side: one look is promising but not conclusive.
    let mut args = one_args();
    let at = args.iter().position(|arg| *arg == "--runs").unwrap();
    args[at + 1] = "3";
    let run = abort_at(&test, &args, "climb-look", &[("CLIMB_COUNT", count.as_path())]);
    assert_eq!(of_type(&test.events(&run), "experiment_measured").len(), 1);
    let log = run_dir(&test, &run).join("logs/faster-measure.log");
    assert_eq!(metric_runs(&log), 6);

    let output = spawn_with(&test, &["resume", &run], &[("CLIMB_COUNT", count.as_path())]).wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    let looks: Vec<u64> = of_type(&events, "experiment_measured")
        .iter()
        .map(|event| event["look"].as_u64().unwrap())
        .collect();
    assert!(looks.len() >= 2, "measured again after the first look: {looks:?}");
    assert_eq!(looks, (1..=looks.len() as u64).collect::<Vec<_>>(), "each look once");
    let decided = of_type(&events, "experiment_decided");
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["values"].as_array().unwrap().len(), 3 * looks.len());
    assert_eq!(metric_runs(&log), 6 * looks.len(), "the first look was not measured again");
    assert!(
        decided[0]["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("{} run(s) a side", 3 * looks.len()))
    );
}

/// A planner proposing `slow` (a neutral change, its implementer streaming slowly) and
/// then `faster` (kept): `faster` is measured first (its measurement is queued before
/// `slow`'s turn ends).
fn slow_then_faster() -> Vec<Step> {
    let mut steps = propose(&[
        experiment("slow", "the notes slow nothing down"),
        experiment("faster", "a.txt costs less when it holds 30"),
    ]);
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement_slowly("slow", &[("notes.txt", "slow\n")], 300));
    steps
}

/// Killed between `faster`'s keep and its merge while `slow` waits to be measured: the
/// resume merges `faster` and measures its baseline before `slow` is measured, so `slow`
/// is measured against the baseline it would be merged onto. On resume `faster` would
/// yield the gate to any other running experiment (`climb-keep-late`): only merging it
/// before any driver starts keeps `slow` off the old baseline.
#[test]
fn a_keep_left_unmerged_is_merged_before_anything_else_is_measured() {
    let test = SwarmTest::new(&files(), slow_then_faster(), "");
    let run = abort_at(&test, &two_args(), "climb-measured", &[]);
    let events = test.events(&run);
    assert_eq!(decisions(&events), [("faster".to_string(), "kept".to_string())], "{events:#?}");
    assert!(of_type(&events, "committed").iter().any(|e| e["task"] == "slow"), "{events:#?}");

    let mut command = test.command(&["swarm", "resume", &run]);
    command.env("KESTREL_SWARM_FAILPOINT", "climb-keep-late:faster");
    let output = test.output_within(command);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(
        decisions(&events),
        [("faster".to_string(), "kept".to_string()), ("slow".to_string(), "neutral".to_string())]
    );
    let baselines = of_type(&events, "baseline_measured");
    let after_faster = baselines.last().unwrap()["commit"].clone();
    let slow = of_type(&events, "experiment_decided").into_iter().find(|e| e["task"] == "slow");
    assert_eq!(slow.unwrap()["baseline_commit"], after_faster, "{events:#?}");
    let branch = format!("kestrel/{run}");
    let merged = git(test.repo.path(), &["rev-parse", &format!("{branch}^2")]);
    assert_eq!(
        merged.trim(),
        of_type(&events, "experiment_decided")[0]["commit"].as_str().unwrap()
    );
}

/// A kept experiment that no longer merges (its branch moved by hand after a kill) is
/// `build_failed`; the climb goes on and ends `done`.
#[test]
fn a_keep_that_conflicts_fails_the_experiment_not_the_run() {
    let test = SwarmTest::new(&files(), one_experiment("faster"), "");
    let run = abort_at(&test, &one_args(), "climb-measured", &[]);
    let integration = run_workdir(&test, &run).join("by-hand");
    let branch = format!("kestrel/{run}");
    git(test.repo.path(), &["worktree", "add", "-q", integration.to_str().unwrap(), &branch]);
    std::fs::write(integration.join("a.txt"), "40\n").unwrap();
    git(&integration, &["commit", "-q", "-am", "by hand"]);
    git(test.repo.path(), &["worktree", "remove", "--force", integration.to_str().unwrap()]);

    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    let decided = of_type(&events, "experiment_decided");
    let last = decided.last().unwrap();
    assert_eq!(last["decision"], "build_failed", "{events:#?}");
    assert!(last["reason"].as_str().unwrap().contains("conflicts with"), "{last}");
    assert!(of_type(&events, "merged").is_empty());
    assert_eq!(of_type(&events, "run_finished").last().unwrap()["state"], "done");
}

/// A climb asks its planner again on resume, so the planner's key is checked then too,
/// with experiments already proposed.
#[test]
fn resuming_a_climb_checks_the_planners_key() {
    let test = SwarmTest::new(&files(), script(), "");
    let run = abort_at(&test, &climb_args(), "climb-measured", &[]);
    assert_eq!(of_type(&test.events(&run), "experiments_proposed").len(), 1);
    let roles = format!(
        "\n[swarm.roles.reviewer]\nmodel = \"scripted/{}\"\n\n[swarm.roles.planner]\nmodel = \"keyless/plan\"\n",
        swarm_support::REVIEWER
    );
    config_with_roles(&test, &roles);
    let before = test.events(&run).len();
    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("KESTREL_TEST_NEVER_SET_KEY"), "{}", stderr(&output));
    assert_eq!(test.events(&run).len(), before, "nothing happened");
}

/// The baseline fails during a measurement, then works on resume and the experiment is
/// neutral (no new baseline is measured): the failure is cleared all the same.
#[test]
fn a_baseline_failure_clears_once_the_baseline_is_measured_again() {
    // From its 3rd run on (the first baseline took 2), the metric fails on the old notes
    // while a file exists.
    let files = with_metric(
        "n=$(cat \"$CLIMB_COUNT\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$CLIMB_COUNT\"\n\
         if [ -e \"$CLIMB_BREAK\" ] && [ \"$n\" -ge 2 ] && [ \"$(cat notes.txt)\" = notes ]; then exit 3; fi\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let mut steps = propose(&[experiment("same", "the notes slow nothing down")]);
    steps.extend(implement("same", &[("notes.txt", "more notes\n")]));
    let test = SwarmTest::new(&files, steps, "");
    let dir = tempfile::tempdir().unwrap();
    let (count, broken) = (dir.path().join("count"), dir.path().join("break"));
    std::fs::write(&broken, "").unwrap();
    let env = [("CLIMB_COUNT", count.as_path()), ("CLIMB_BREAK", broken.as_path())];
    let output = spawn_with(&test, &one_args(), &env).wait();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let run = test.run_id();
    assert!(test.status_json(&run)["climb"]["baseline_failure"].is_string());

    std::fs::remove_file(&broken).unwrap();
    let output = spawn_with(&test, &["resume", &run], &env).wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(decisions(&events), [("same".to_string(), "neutral".to_string())]);
    assert_eq!(of_type(&events, "baseline_measured").len(), 1, "no new baseline");
    assert_eq!(test.status_json(&run)["climb"]["baseline_failure"], Value::Null);
}

/// With --review: `same` is reviewed, then the baseline `faster` made is merged into it
/// before its measurement; killed after its first look, the resume goes on measuring it
/// without a second review.
#[test]
fn a_baseline_merged_into_a_reviewed_experiment_is_not_reviewed_again() {
    let mut steps = propose(&[
        experiment("same", "the notes slow nothing down"),
        experiment("faster", "a.txt costs less when it holds 30"),
    ]);
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement_slowly("same", &[("notes.txt", "more notes\n")], 300));
    steps.extend(review("faster", 1, true, &[]));
    steps.extend(review("same", 1, true, &[]));
    let test = SwarmTest::new(&files(), steps, "");
    let mut args = two_args();
    args.insert(args.len() - 1, "--review");
    let run = abort_at(&test, &args, "climb-look:same", &[]);
    let events = test.events(&run);
    assert_eq!(of_type(&events, "baseline_merged_in").len(), 1, "{events:#?}");

    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(
        decisions(&events),
        [("faster".to_string(), "kept".to_string()), ("same".to_string(), "neutral".to_string())]
    );
    let reviews = of_type(&events, "reviewed").into_iter().filter(|e| e["task"] == "same").count();
    assert_eq!(reviews, 1, "{events:#?}");
}
