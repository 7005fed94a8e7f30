//! `kestrel swarm climb` through the binary, with the scripted model: a toy repository
//! whose metric (a sum of three files) is deterministic; the planner proposes four
//! experiments — one improves, one regresses, one breaks the check, one changes nothing
//! measurable. Only the improvement is merged, climb.md says why for each, a climb killed
//! after a measurement resumes without measuring again, and bad input exits 2.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use kestrel_testkit::Step;
use serde_json::{Value, json};
use std::path::Path;
use swarm_support::{
    PLANNER, SwarmTest, git, implement, implement_slowly, of_type, review, run_workdir, stderr,
};

/// The number to lower: the sum of a.txt, b.txt and c.txt (100 at the start). It talks
/// first: the number is its last line.
const METRIC: &str = "sh metric.sh";
const CHECK: &str = "sh check.sh";

fn files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("metric.sh", "echo measuring\necho $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n"),
        ("check.sh", "test \"$(cat ok.txt)\" = ok\n"),
        ("a.txt", "50\n"),
        ("b.txt", "30\n"),
        ("c.txt", "20\n"),
        ("ok.txt", "ok\n"),
        ("notes.txt", "notes\n"),
    ]
}

fn experiment(id: &str, hypothesis: &str) -> Value {
    json!({"id": id, "hypothesis": hypothesis, "description": format!("Do {id}.")})
}

/// The planner proposes the four; each implementer writes its one file.
fn script() -> Vec<Step> {
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("faster", "a.txt costs less when it holds 30"),
                experiment("slower", "b.txt at 50 looks simpler"),
                experiment("broken", "ok.txt is not needed"),
                experiment("same", "the notes slow nothing down"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement("slower", &[("b.txt", "50\n")]));
    steps.extend(implement("broken", &[("ok.txt", "gone\n")]));
    steps.extend(implement("same", &[("notes.txt", "more notes\n")]));
    steps
}

fn climb_args() -> Vec<&'static str> {
    vec![
        "climb",
        "--metric",
        METRIC,
        "--direction",
        "lower",
        "--check",
        CHECK,
        "--experiments",
        "4",
        "--runs",
        "2",
        "--yes",
    ]
}

fn decisions(events: &[Value]) -> Vec<(String, String)> {
    let mut decided: Vec<(String, String)> = of_type(events, "experiment_decided")
        .iter()
        .map(|e| (e["task"].as_str().unwrap().to_string(), e["decision"].as_str().unwrap().into()))
        .collect();
    decided.sort();
    decided
}

fn expected() -> Vec<(String, String)> {
    [("broken", "check_failed"), ("faster", "kept"), ("same", "neutral"), ("slower", "worse")]
        .iter()
        .map(|(id, decision)| (id.to_string(), decision.to_string()))
        .collect()
}

/// Only `faster` is on the integration branch, merged once with its trailer; the
/// user's branch is untouched.
fn assert_only_the_improvement_merged(test: &SwarmTest, run: &str) {
    let branch = format!("kestrel/{run}");
    let show = |file: &str| git(test.repo.path(), &["show", &format!("{branch}:{file}")]);
    assert_eq!(show("a.txt"), "30\n");
    assert_eq!(show("b.txt"), "30\n");
    assert_eq!(show("ok.txt"), "ok\n");
    assert_eq!(show("notes.txt"), "notes\n");
    let trailers = git(
        test.repo.path(),
        &[
            "log",
            "--merges",
            "--first-parent",
            "--format=%(trailers:key=Kestrel-Swarm,valueonly)",
            &format!("main..{branch}"),
        ],
    );
    let merged: Vec<&str> = trailers.lines().filter(|line| !line.trim().is_empty()).collect();
    assert_eq!(merged, [format!("{run}/faster/1")], "{trailers}");
    assert_eq!(git(test.repo.path(), &["show", "main:a.txt"]), "50\n");
}

fn run_dir(test: &SwarmTest, run: &str) -> std::path::PathBuf {
    test.home.path().join("swarm").join(run)
}

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

#[test]
fn a_climb_killed_after_a_measurement_resumes_without_measuring_it_again() {
    let test = SwarmTest::new(&files(), script(), "");
    let mut command = test.command(&[&["swarm"], &climb_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-measured");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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
    let mut command = test.command(&[&["swarm"], &climb_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-measured");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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
    assert!(test.model_requests().is_empty(), "no planner without a baseline");
    let status = test.status_json(&run);
    assert!(status["climb"]["baseline_failure"].as_str().unwrap().contains("printed no number"));
}

fn millis(ts: &Value) -> i64 {
    serde_json::from_value::<kestrel_protocol::Timestamp>(ts.clone()).unwrap().millis
}

#[test]
fn no_metric_run_overlaps_a_role_turn() {
    // `slow`'s implementer streams slowly while `faster` is ready to be measured: the
    // measurement waits for the turn.
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("faster", "a.txt costs less when it holds 30"),
                experiment("slow", "the notes slow nothing down"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement_slowly("slow", &[("notes.txt", "slow\n")], 400));
    let mut files = files();
    files[0] = (
        "metric.sh",
        "date +%s%3N >> \"$CLIMB_STAMPS\"\necho $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let test = SwarmTest::new(&files, steps, "");
    let stamps = tempfile::tempdir().unwrap();
    let stamps = stamps.path().join("stamps");
    let mut command = test.command(&[
        "swarm",
        "climb",
        "--metric",
        METRIC,
        "--direction",
        "lower",
        "--experiments",
        "2",
        "--runs",
        "2",
        "--yes",
    ]);
    command.env("CLIMB_STAMPS", &stamps);
    let output = test.output_within(command);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&test.run_id());
    assert_eq!(
        decisions(&events),
        [("faster".to_string(), "kept".to_string()), ("slow".to_string(), "neutral".to_string())]
    );
    let runs: Vec<i64> = std::fs::read_to_string(&stamps)
        .unwrap()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect();
    // 2 for the first baseline; 16 for `faster` (exact, but 2 runs a side only tell a
    // difference from chance at the 4th look), 4 for `slow` (equal at once); 2 for the
    // new baseline.
    assert_eq!(runs.len(), 2 + 16 + 4 + 2, "{runs:?}");
    let mut turns = 0;
    for started in of_type(&events, "turn_started") {
        let finished = of_type(&events, "turn_finished")
            .into_iter()
            .find(|f| f["session"] == started["session"] && f["attempt"] == started["attempt"])
            .unwrap();
        let (from, to) = (millis(&started["ts"]), millis(&finished["ts"]));
        for run in &runs {
            assert!(
                !(from < *run && *run < to),
                "a metric run at {run} inside the {} turn of {} ({from}..{to})",
                started["role"],
                started["task"]
            );
        }
        turns += 1;
    }
    assert_eq!(turns, 3, "the planner's and two implementers' turns");
}

#[test]
fn max_cost_stops_a_climb_and_resume_goes_on() {
    let test = SwarmTest::new(&files(), script(), "");
    let mut args = climb_args();
    args.extend(["--max-cost", "0"]);
    let output = test.swarm_within(&args);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(of_type(&events, "budget_reached").len(), 1);
    assert_eq!(of_type(&events, "run_finished")[0]["state"], "budget");
    assert!(of_type(&events, "experiments_proposed").is_empty(), "no planner turn started");
    assert!(test.model_requests().is_empty());

    let output = test.swarm_within(&["resume", &run, "--max-cost", "100"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(decisions(&events), expected());
    assert_eq!(of_type(&events, "baseline_measured").len(), 2, "the first baseline kept");
    assert_only_the_improvement_merged(&test, &run);
}

#[test]
fn with_review_a_rejected_experiment_is_never_measured() {
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("faster", "a.txt costs less when it holds 30"),
                experiment("slower", "b.txt at 50 looks simpler"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
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

/// A planner proposing only `id`, which lowers the sum to 80 (a.txt 50 → 30).
fn one_experiment(id: &str) -> Vec<Step> {
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [experiment(id, "a.txt costs less when it holds 30")]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement(id, &[("a.txt", "30\n")]));
    steps
}

fn one_args() -> Vec<&'static str> {
    let mut args = climb_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "1";
    args
}

/// `kestrel swarm ARGS` in the background with `env` set.
fn spawn_with(test: &SwarmTest, args: &[&str], env: &[(&str, &Path)]) -> swarm_support::Background {
    let mut command = test.command(&[&["swarm"], args].concat());
    for (name, value) in env {
        command.env(name, value);
    }
    test.spawn(command)
}

fn wait_until(what: &str, check: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < swarm_support::wait(), "timed out waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether process `pid` exists and is not a zombie.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn metric_runs(log: &Path) -> usize {
    std::fs::read_to_string(log).unwrap_or_default().matches("$ sh metric.sh").count()
}

#[test]
fn ctrl_c_before_the_first_experiment_stops_cleanly_and_the_resume_climbs_on() {
    // The metric holds while a file exists (its sleep's pid written down); the planner's
    // turn first reads a FIFO (a read-only command), which holds it until the test writes.
    let dir = tempfile::tempdir().unwrap();
    let (hold, pid) = (dir.path().join("hold"), dir.path().join("pid"));
    let fifo = dir.path().join("planning");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let held = format!("cat '{}'", fifo.display());
    let mut steps = vec![
        Step::tool_call("shell", json!({"command": held}))
            .when(Some(PLANNER), Some("task=plan role=planner")),
    ];
    steps.extend(one_experiment("faster"));
    let mut files = files();
    files[0] = (
        "metric.sh",
        "if [ -e \"$CLIMB_HOLD\" ]; then sleep 300 & echo $! > \"$CLIMB_PID\"; wait; fi\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let test = SwarmTest::new(&files, steps, "");
    std::fs::write(&hold, "").unwrap();
    let env = [("CLIMB_HOLD", hold.as_path()), ("CLIMB_PID", pid.as_path())];

    // Ctrl+C while the baseline is measured.
    let first = spawn_with(&test, &one_args(), &env);
    let sleeper = || std::fs::read_to_string(&pid).ok()?.trim().parse::<i32>().ok();
    wait_until("the metric to hold", || sleeper().is_some());
    let sleeper = sleeper().unwrap();
    first.interrupt();
    let output = first.wait();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("kestrel swarm resume"), "{err}");
    wait_until("the metric's processes to be killed", || !alive(sleeper));
    let run = test.run_id();
    assert_eq!(test.status_json(&run)["state"], "interrupted");
    assert!(of_type(&test.events(&run), "baseline_measured").is_empty());

    // Ctrl+C while the planner's first turn runs.
    std::fs::remove_file(&hold).unwrap();
    let second = spawn_with(&test, &["resume", &run], &env);
    wait_until("the planner's turn", || !test.requests_for(PLANNER).is_empty());
    second.interrupt();
    let output = second.wait();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(test.status_json(&run)["state"], "interrupted");
    let events = test.events(&run);
    assert_eq!(of_type(&events, "baseline_measured").len(), 1);
    assert!(of_type(&events, "experiments_proposed").is_empty(), "{events:#?}");

    // The planner's command reads (its turn goes on in the daemon): released now.
    use std::os::unix::fs::OpenOptionsExt;
    let open = || {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).custom_flags(libc::O_NONBLOCK).open(&fifo).ok()
    };
    wait_until("the planner's command to read", || open().is_some());
    let mut writer = open().unwrap();
    std::io::Write::write_all(&mut writer, b"planning-released\n").unwrap();
    drop(writer);
    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(decisions(&test.events(&run)), [("faster".to_string(), "kept".to_string())]);
    let planner = test.requests_for(PLANNER);
    let ran = planner[1].to_string().contains("planning-released");
    assert!(ran, "the command ran: {}", planner[1]);
}

/// A kill between a kept experiment's merge and its `merged` event: the resume finds the
/// merge by its trailer and credits the new baseline to it. The experiment is called
/// `baseline-1`: its logs are its own, apart from the baselines'.
#[test]
fn a_merge_whose_event_was_lost_is_credited_on_resume() {
    let test = SwarmTest::new(&files(), one_experiment("baseline-1"), "");
    let mut command = test.command(&[&["swarm"], &one_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-merge");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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
    let mut command = test.command(&[&["swarm"], &one_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-measured");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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
    let mut files = files();
    // From its 3rd run on (the first baseline took 2), the metric fails on the old a.txt
    // while a file exists.
    files[0] = (
        "metric.sh",
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
    let mut files = files();
    files[0] = (
        "metric.sh",
        "n=$(cat \"$CLIMB_COUNT\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$CLIMB_COUNT\"\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) + n % 3 ))\n",
    );
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [experiment("faster", "a.txt costs less when it holds 48")]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "48\n")]));
    let test = SwarmTest::new(&files, steps, "");
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    // 3 runs a side: one look is promising but not conclusive.
    let mut args = one_args();
    let at = args.iter().position(|arg| *arg == "--runs").unwrap();
    args[at + 1] = "3";
    let mut command = test.command(&[&["swarm"], &args[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-look").env("CLIMB_COUNT", &count);
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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

/// A climb interrupted while an implementer's turn streams and another experiment waits to
/// be measured: on resume the turn goes on in the daemon (taken over) and no metric run
/// falls inside it, across both processes.
#[test]
fn on_resume_no_metric_run_overlaps_a_turn_left_in_flight() {
    // `slow`'s implementer runs a command that holds its turn while a file exists: the
    // turn is in flight at the interrupt and when the resume starts, whatever the timing.
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    std::fs::write(&hold, "").unwrap();
    let when = "task=slow role=implementer";
    let held = format!("while [ -e '{}' ]; do sleep 0.05; done", hold.display());
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("faster", "a.txt costs less when it holds 30"),
                experiment("slow", "the notes slow nothing down"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend([
        Step::tool_call("shell", json!({"command": held}))
            .when(Some(swarm_support::IMPLEMENTER), Some(when)),
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "slow\n"}))
            .when(Some(swarm_support::IMPLEMENTER), Some(when)),
        Step::text("done").when(Some(swarm_support::IMPLEMENTER), Some(when)),
    ]);
    let mut files = files();
    files[0] = (
        "metric.sh",
        "date +%s%3N >> \"$CLIMB_STAMPS\"\necho $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let test = SwarmTest::new(&files, steps, "");
    let stamps = dir.path().join("stamps");
    let mut args = climb_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "2";
    let first = spawn_with(&test, &args, &[("CLIMB_STAMPS", stamps.as_path())]);
    test.wait_for_event("faster's commit", |e| e["type"] == "committed" && e["task"] == "faster");
    test.wait_for_event("slow's turn", |e| {
        e["type"] == "turn_started" && e["task"] == "slow" && e["role"] == "implementer"
    });
    wait_until("slow's model request", || {
        test.requests_for(swarm_support::IMPLEMENTER)
            .iter()
            .any(|body| body.to_string().contains("task=slow role=implementer"))
    });
    first.interrupt();
    let output = first.wait();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let run = test.run_id();
    assert!(of_type(&test.events(&run), "turn_finished").iter().all(|e| e["task"] != "slow"));

    let resumed = spawn_with(&test, &["resume", &run], &[("CLIMB_STAMPS", stamps.as_path())]);
    test.wait_for_event("the resume", |e| e["type"] == "run_resumed");
    std::fs::remove_file(&hold).unwrap();
    let output = resumed.wait();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&run);
    assert_eq!(
        decisions(&events),
        [("faster".to_string(), "kept".to_string()), ("slow".to_string(), "neutral".to_string())]
    );
    let runs: Vec<i64> = std::fs::read_to_string(&stamps)
        .unwrap()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect();
    let slow = of_type(&events, "turn_started")
        .into_iter()
        .find(|e| e["task"] == "slow" && e["role"] == "implementer")
        .unwrap();
    let finished = of_type(&events, "turn_finished")
        .into_iter()
        .find(|f| f["session"] == slow["session"] && f["attempt"] == slow["attempt"])
        .unwrap();
    let (from, to) = (millis(&slow["ts"]), millis(&finished["ts"]));
    for run in &runs {
        assert!(
            !(from < *run && *run < to),
            "a metric run at {run} inside slow's turn ({from}..{to})"
        );
    }
}

/// A planner proposing `slow` (a neutral change, its implementer streaming slowly) and
/// then `faster` (kept): `faster` is measured first (its measurement is queued before
/// `slow`'s turn ends).
fn slow_then_faster() -> Vec<Step> {
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("slow", "the notes slow nothing down"),
                experiment("faster", "a.txt costs less when it holds 30"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement_slowly("slow", &[("notes.txt", "slow\n")], 300));
    steps
}

fn two_args() -> Vec<&'static str> {
    let mut args = climb_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "2";
    let check = args.iter().position(|arg| *arg == "--check").unwrap();
    args.drain(check..check + 2);
    args
}

/// Killed between `faster`'s keep and its merge while `slow` waits to be measured: the
/// resume merges `faster` and measures its baseline before `slow` is measured, so `slow`
/// is measured against the baseline it would be merged onto.
#[test]
fn a_keep_left_unmerged_is_merged_before_anything_else_is_measured() {
    let test = SwarmTest::new(&files(), slow_then_faster(), "");
    let mut command = test.command(&[&["swarm"], &two_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-measured");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(decisions(&events), [("faster".to_string(), "kept".to_string())], "{events:#?}");
    assert!(of_type(&events, "committed").iter().any(|e| e["task"] == "slow"), "{events:#?}");

    let output = test.swarm_within(&["resume", &run]);
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
    let mut command = test.command(&[&["swarm"], &one_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-measured");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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

/// config.toml with the scripted provider, `[providers.keyless]` (its key variable never
/// set) and `roles` for the swarm's roles.
fn config_with_roles(test: &SwarmTest, roles: &str) {
    let config = format!(
        "model = \"scripted/{}\"\n\n[providers.scripted]\nbase_url = \"{url}\"\nwire_api = \"chat\"\n\
         api_key_env = \"{}\"\nrequest_max_retries = 1\n\n[providers.keyless]\nbase_url = \"{url}\"\n\
         wire_api = \"chat\"\napi_key_env = \"KESTREL_TEST_NEVER_SET_KEY\"\n\n[swarm]\n\
         workdir = \"{}\"\n{roles}",
        swarm_support::IMPLEMENTER,
        swarm_support::KEY_VAR,
        test.workdir.path().display(),
        url = test.server.base_url(),
    );
    std::fs::write(test.home.path().join("config.toml"), config).unwrap();
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

/// A climb asks its planner again on resume, so the planner's key is checked then too,
/// with experiments already proposed.
#[test]
fn resuming_a_climb_checks_the_planners_key() {
    let test = SwarmTest::new(&files(), script(), "");
    let mut command = test.command(&[&["swarm"], &climb_args()[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-measured");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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

/// A cancel (`kestrel swarm cancel RUN [EXP]`) while the experiment is measured: it is
/// heard at the next look and nothing is decided or merged. The metric holds on the
/// experiment's side while a file exists, so the cancel lands inside the first look.
fn cancel_during_measurement(experiment_too: bool) {
    let mut files = files();
    files[0] = (
        "metric.sh",
        "if [ -e \"$CLIMB_HOLD\" ] && [ \"$(cat a.txt)\" = 30 ]; then\n\
         echo held > \"$CLIMB_HELD\"; while [ -e \"$CLIMB_HOLD\" ]; do sleep 0.05; done; fi\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let test = SwarmTest::new(&files, one_experiment("faster"), "");
    let dir = tempfile::tempdir().unwrap();
    let (hold, held) = (dir.path().join("hold"), dir.path().join("held"));
    std::fs::write(&hold, "").unwrap();
    let env = [("CLIMB_HOLD", hold.as_path()), ("CLIMB_HELD", held.as_path())];
    let climb = spawn_with(&test, &one_args(), &env);
    wait_until("the experiment's first run", || held.exists());
    let run = test.run_id();
    let mut cancel = vec!["cancel", run.as_str()];
    if experiment_too {
        cancel.push("faster");
    }
    let output = test.swarm_within(&cancel);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    std::fs::remove_file(&hold).unwrap();
    let output = climb.wait();
    let events = test.events(&run);
    assert!(of_type(&events, "experiment_decided").is_empty(), "{events:#?}");
    assert!(of_type(&events, "merged").is_empty(), "{events:#?}");
    assert!(of_type(&events, "task_cancelled").iter().any(|e| e["task"] == "faster"));
    assert_eq!(of_type(&events, "experiment_measured").len(), 1, "one look, no more");
    let state = if experiment_too { "done" } else { "cancelled" };
    assert_eq!(of_type(&events, "run_finished").last().unwrap()["state"], state, "{events:#?}");
    let code = if experiment_too { 0 } else { 1 };
    assert_eq!(output.status.code(), Some(code), "{}", stderr(&output));
}

#[test]
fn an_experiment_cancelled_during_its_measurement_is_not_kept() {
    cancel_during_measurement(true);
}

#[test]
fn a_climb_cancelled_during_a_measurement_keeps_nothing() {
    cancel_during_measurement(false);
}

/// An implementer whose turn fails after writing: `build_failed`, and what it wrote is
/// committed on its branch and kept as `logs/<id>.diff`.
#[test]
fn a_failed_build_keeps_its_diff() {
    let route = "task=plan role=planner";
    let when = "task=faster role=implementer";
    let steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [experiment("faster", "a.txt costs less when it holds 30")]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
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
    ];
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
}

/// The baseline fails during a measurement, then works on resume and the experiment is
/// neutral (no new baseline is measured): the failure is cleared all the same.
#[test]
fn a_baseline_failure_clears_once_the_baseline_is_measured_again() {
    let mut files = files();
    // From its 3rd run on (the first baseline took 2), the metric fails on the old notes
    // while a file exists.
    files[0] = (
        "metric.sh",
        "n=$(cat \"$CLIMB_COUNT\" 2>/dev/null || echo 0); echo $((n + 1)) > \"$CLIMB_COUNT\"\n\
         if [ -e \"$CLIMB_BREAK\" ] && [ \"$n\" -ge 2 ] && [ \"$(cat notes.txt)\" = notes ]; then exit 3; fi\n\
         echo $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n",
    );
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [experiment("same", "the notes slow nothing down")]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
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

/// With --review: `same` is reviewed, then the baseline `faster` made is merged into it
/// before its measurement; killed after its first look, the resume goes on measuring it
/// without a second review.
#[test]
fn a_baseline_merged_into_a_reviewed_experiment_is_not_reviewed_again() {
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("same", "the notes slow nothing down"),
                experiment("faster", "a.txt costs less when it holds 30"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement_slowly("same", &[("notes.txt", "more notes\n")], 300));
    steps.extend(review("faster", 1, true, &[]));
    steps.extend(review("same", 1, true, &[]));
    let test = SwarmTest::new(&files(), steps, "");
    let mut args = two_args();
    args.insert(args.len() - 1, "--review");
    let mut command = test.command(&[&["swarm"], &args[..]].concat());
    command.env("KESTREL_SWARM_FAILPOINT", "climb-look:same");
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", stderr(&output));
    let run = test.run_id();
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

/// Experiments whose `files` hints share a file never run at once: the second starts
/// once the first is decided (and merged).
#[test]
fn experiments_sharing_a_file_run_one_after_the_other() {
    let route = "task=plan role=planner";
    let hinted = |id: &str, hypothesis: &str, files: &[&str]| {
        let mut experiment = experiment(id, hypothesis);
        experiment["files"] = json!(files);
        experiment
    };
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                hinted("faster", "a.txt costs less when it holds 30", &["a.txt"]),
                hinted("notes", "the notes slow nothing down", &["notes.txt"]),
                hinted("fastest", "a.txt costs even less at 20", &["./a.txt", "b.txt"]),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement("notes", &[("notes.txt", "more notes\n")]));
    steps.extend(implement("fastest", &[("a.txt", "20\n")]));
    let test = SwarmTest::new(&files(), steps, "");
    let mut args = two_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "3";
    let output = test.swarm_within(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&test.run_id());
    let at = |kind: &str, task: &str| {
        events.iter().position(|e| e["type"] == kind && e["task"] == task).unwrap()
    };
    let (first, second) = if at("attempt_started", "faster") < at("attempt_started", "fastest") {
        ("faster", "fastest")
    } else {
        ("fastest", "faster")
    };
    assert!(at("experiment_decided", first) < at("attempt_started", second), "{events:#?}");
    // `notes` shares nothing: it started with the first.
    assert!(at("attempt_started", "notes") < at("experiment_decided", first), "{events:#?}");
}

/// With one turn at a time, turns waiting for the slot do not hold the gate: the first
/// experiment built is measured before the last one's turn starts (it waited for every
/// turn when they held the gate while queued).
#[test]
fn turns_queued_for_a_slot_do_not_hold_a_measurement_up() {
    let route = "task=plan role=planner";
    let mut steps = vec![
        Step::tool_call(
            "swarm_experiments",
            json!({"experiments": [
                experiment("faster", "a.txt costs less when it holds 30"),
                experiment("notes", "the notes slow nothing down"),
                experiment("slower", "b.txt at 50 looks simpler"),
            ]}),
        )
        .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ];
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement("notes", &[("notes.txt", "more notes\n")]));
    steps.extend(implement("slower", &[("b.txt", "50\n")]));
    let test = SwarmTest::new(&files(), steps, "");
    let mut args = two_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "3";
    args.extend(["--max-parallel", "1"]);
    let output = test.swarm_within(&args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = test.events(&test.run_id());
    let measured = events.iter().position(|e| e["type"] == "experiment_measured").unwrap();
    let last_turn = events
        .iter()
        .rposition(|e| e["type"] == "turn_started" && e["role"] == "implementer")
        .unwrap();
    assert!(measured < last_turn, "{events:#?}");
}
