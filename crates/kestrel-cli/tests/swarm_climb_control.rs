//! Controlling a `kestrel swarm climb`: Ctrl+C, `swarm cancel` during a measurement or
//! between runs, `--max-cost`, and the scheduling — no metric run overlaps a role turn,
//! experiments sharing a file run one after the other, queued turns do not hold the gate.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;

use kestrel_testkit::Step;
use serde_json::{Value, json};
use swarm_support::climb::{
    METRIC, assert_only_the_improvement_merged, climb_args, decisions, expected, experiment, files,
    one_args, one_experiment, propose, script, spawn_with, two_args, with_metric,
};
use swarm_support::{PLANNER, SwarmTest, implement, implement_slowly, of_type, stderr};

/// The metric, stamping each run's start (ms) into $CLIMB_STAMPS.
const STAMPED_METRIC: &str =
    "date +%s%3N >> \"$CLIMB_STAMPS\"\necho $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n";

/// The start of every metric run STAMPED_METRIC recorded (ms).
fn stamped_runs(stamps: &std::path::Path) -> Vec<i64> {
    std::fs::read_to_string(stamps)
        .unwrap()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect()
}

fn millis(ts: &Value) -> i64 {
    serde_json::from_value::<kestrel_protocol::Timestamp>(ts.clone()).unwrap().millis
}

#[test]
fn no_metric_run_overlaps_a_role_turn() {
    // `slow`'s implementer streams slowly while `faster` is ready to be measured: the
    // measurement waits for the turn.
    let mut steps = propose(&[
        experiment("faster", "a.txt costs less when it holds 30"),
        experiment("slow", "the notes slow nothing down"),
    ]);
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement_slowly("slow", &[("notes.txt", "slow\n")], 400));
    let files = with_metric(STAMPED_METRIC);
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
    let runs = stamped_runs(&stamps);
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

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
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
    let files = with_metric(
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
    // The first writer that opens is the one that writes: closing it unwritten would
    // end the reader's `cat` at once.
    let mut writer = None;
    wait_until("the planner's command to read", || {
        writer = open();
        writer.is_some()
    });
    let mut writer = writer.unwrap();
    std::io::Write::write_all(&mut writer, b"planning-released\n").unwrap();
    drop(writer);
    let output = test.swarm_within(&["resume", &run]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(decisions(&test.events(&run)), [("faster".to_string(), "kept".to_string())]);
    let planner = test.requests_for(PLANNER);
    let ran = planner[1].to_string().contains("planning-released");
    assert!(ran, "the command ran: {}", planner[1]);
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
    let mut steps = propose(&[
        experiment("faster", "a.txt costs less when it holds 30"),
        experiment("slow", "the notes slow nothing down"),
    ]);
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend([
        Step::tool_call("shell", json!({"command": held}))
            .when(Some(swarm_support::IMPLEMENTER), Some(when)),
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "slow\n"}))
            .when(Some(swarm_support::IMPLEMENTER), Some(when)),
        Step::text("done").when(Some(swarm_support::IMPLEMENTER), Some(when)),
    ]);
    let files = with_metric(STAMPED_METRIC);
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
    let runs = stamped_runs(&stamps);
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

/// A cancel (`kestrel swarm cancel RUN [EXP]`) while the experiment is measured: it is
/// heard at the next look and nothing is decided or merged. The metric holds on the
/// experiment's side while a file exists, so the cancel lands inside the first look.
fn cancel_during_measurement(experiment_too: bool) {
    let files = with_metric(
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

/// Experiments whose `files` hints share a file never run at once: the second starts
/// once the first is decided (and merged).
#[test]
fn experiments_sharing_a_file_run_one_after_the_other() {
    let hinted = |id: &str, hypothesis: &str, files: &[&str]| {
        let mut experiment = experiment(id, hypothesis);
        experiment["files"] = json!(files);
        experiment
    };
    let mut steps = propose(&[
        hinted("faster", "a.txt costs less when it holds 30", &["a.txt"]),
        hinted("notes", "the notes slow nothing down", &["notes.txt"]),
        hinted("fastest", "a.txt costs even less at 20", &["./a.txt", "b.txt"]),
    ]);
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
    let mut steps = propose(&[
        experiment("faster", "a.txt costs less when it holds 30"),
        experiment("notes", "the notes slow nothing down"),
        experiment("slower", "b.txt at 50 looks simpler"),
    ]);
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
