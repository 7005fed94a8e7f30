//! The swarm's verifier through the real binary, against model-written code: secret-looking
//! variables of the orchestrator never reach a setup or acceptance command (so never the
//! log, the events or the next prompt), `setup` runs in the sandbox (writes only in the
//! clone and the temp dirs), and nothing a command started in the background outlives it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod swarm_support;
#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

use kestrel_testkit::Step;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use swarm_support::{ConfigParts, IMPLEMENTER, SwarmTest, implement, of_type, review, stderr};

const FILES: &[(&str, &str)] = &[("README", "toy\n")];

/// Two attempts of `greet`, both approved: the first writes hello.txt, the second
/// fixed.txt (which the graphs below use to fail the first verification).
fn two_attempts() -> Vec<Step> {
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.extend(implement("greet", &[("fixed.txt", "fixed\n")]));
    steps.extend(review("greet", 1, true, &[]));
    steps.extend(review("greet", 2, true, &[]));
    steps
}

/// The last message of a request (the prompt or a tool's answer).
fn last_message(body: &serde_json::Value) -> String {
    body["messages"].as_array().unwrap().last().unwrap()["content"].to_string()
}

/// Every regular file beneath `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file()
                && let Ok(bytes) = std::fs::read(entry.path())
                && bytes.windows(needle.len()).any(|window| window == needle.as_bytes())
            {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn secret_looking_variables_never_reach_a_verification_its_log_events_or_the_next_prompt() {
    let test = SwarmTest::new(FILES, two_attempts(), "");
    test.write_config_parts(&ConfigParts { swarm: "max_attempts = 2", ..Default::default() });
    let canary = format!("sk-canary-{}-do-not-leak", std::process::id());
    let plain = format!("plain-visible-{}", std::process::id());
    let graph = test.graph(
        r#"
setup = ["env; echo setup-saw=$KESTREL_TEST_PLAIN_SETTING"]

[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["env; echo acceptance-saw=$KESTREL_TEST_PLAIN_SETTING; test -f fixed.txt"]
"#,
    );
    let mut command = test.command(&["swarm", "run", "--graph", &graph]);
    command.env("KESTREL_TEST_SECRET_TOKEN", &canary).env("KESTREL_TEST_PLAIN_SETTING", &plain);
    let output = test.output_within(command);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    let events = test.events(&run);
    let failed = of_type(&events, "attempt_failed");
    assert_eq!(failed.len(), 1, "{events:#?}");
    assert_eq!(failed[0]["stage"], "verify");

    // The ordinary variable did reach both kinds of command, and their output went on.
    let findings = failed[0]["findings"].to_string();
    assert!(findings.contains(&format!("acceptance-saw={plain}")), "{findings}");
    let retry = test
        .requests_for(IMPLEMENTER)
        .into_iter()
        .map(|body| last_message(&body))
        .find(|prompt| prompt.contains("role=implementer attempt=2"))
        .expect("a prompt for attempt 2");
    assert!(retry.contains(&format!("acceptance-saw={plain}")), "{retry}");
    let log = test.home.path().join("swarm").join(&run).join("logs");
    assert!(!files_containing(&log, &format!("setup-saw={plain}")).is_empty());

    // The secret did not: not in the run's logs or events, nor anywhere in the home (the
    // model's request log included), nor in anything sent to the model.
    assert_eq!(files_containing(test.home.path(), &canary), Vec::<PathBuf>::new());
    assert_eq!(files_containing(test.workdir.path(), &canary), Vec::<PathBuf>::new());
    for request in test.server.requests() {
        assert!(!request.body.to_string().contains(&canary), "{:?}", request.body);
        assert!(!request.headers.iter().any(|(_, value)| value.contains(&canary)));
    }
}

#[test]
fn setup_runs_sandboxed_writing_in_the_clone_but_nowhere_else() {
    let test = SwarmTest::new(FILES, two_attempts(), "");
    test.write_config_parts(&ConfigParts { swarm: "max_attempts = 2", ..Default::default() });
    // Outside every writable root of the sandbox: not in the clone, not in a temp dir.
    let outside = unconfined::unconfined_scratch();
    let outside_path = outside.path().canonicalize().unwrap();
    for scratch in [PathBuf::from("/tmp"), std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let scratch = scratch.canonicalize().unwrap_or(scratch);
        assert!(!outside_path.starts_with(&scratch), "{outside_path:?} is in {scratch:?}");
    }
    let escaped = outside_path.join("escaped.txt");
    let graph = test.graph(&format!(
        r#"
setup = ["echo made > made.txt", "test -f fixed.txt || echo escaped > {}"]

[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["grep -qx made made.txt"]
"#,
        escaped.display()
    ));
    let output = test.swarm_within(&["run", "--graph", &graph]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!escaped.exists(), "a setup command wrote outside the clone");
    let run = test.run_id();
    let events = test.events(&run);
    let failed = of_type(&events, "attempt_failed");
    assert_eq!(failed.len(), 1, "the write outside failed the first attempt: {events:#?}");
    assert_eq!(failed[0]["stage"], "verify");
    let reason = failed[0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("setup command `test -f fixed.txt ||"), "{reason}");
    // The setup that writes in the clone works: the acceptance command read its file.
    let merged = of_type(&events, "merged");
    assert_eq!(merged.len(), 1, "{events:#?}");
    assert_eq!(merged[0]["attempt"], 2);
}

/// The pids of live processes whose arguments include `argument`.
fn processes_with_argument(argument: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        // A zombie's command line is empty: only live processes match.
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if cmdline.split(|byte| *byte == 0).any(|arg| arg == argument.as_bytes()) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn a_background_process_of_a_passing_command_does_not_outlive_the_verification() {
    let mut steps = implement("greet", &[("hello.txt", "hello\n")]);
    steps.extend(review("greet", 1, true, &[]));
    let test = SwarmTest::new(FILES, steps, "");
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let marker = format!("300.{}{nanos:09}", std::process::id());
    let graph = test.graph(&format!(
        r#"
[[task]]
id = "greet"
title = "Write the greeting"
acceptance = ["sleep {marker} > /dev/null 2>&1 & grep -qx hello hello.txt"]
"#
    ));
    let output = test.swarm_within(&["run", "--graph", &graph]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = test.run_id();
    assert_eq!(of_type(&test.events(&run), "merged").len(), 1);

    // A SIGKILLed process may take a moment to become a zombie on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut left = processes_with_argument(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_with_argument(&marker);
    }
    for pid in &left {
        // SAFETY: kill(2) only sends a signal, to a sleep this test's run started.
        unsafe {
            libc::kill(*pid as libc::pid_t, libc::SIGKILL);
        }
    }
    assert_eq!(left, Vec::<u32>::new(), "`sleep {marker}` outlived the verification");
}
