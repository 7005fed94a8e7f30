//! `kestrel exec`'s progress on stderr: a line per tool call and one for its outcome
//! (done, failed with why, not run with why), with and without `--json`; `--quiet`
//! silences it; stdout is the same either way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Script, Step};
use serde_json::json;

fn script() -> Script {
    Script::new([
        Step::tool_call("shell", json!({"command": "echo fine"})),
        Step::tool_call("shell", json!({"command": "ls no-such-dir"})),
        Step::tool_call("write_file", json!({"path": "a.txt", "content": "x"})),
        Step::text("All done."),
    ])
}

#[test]
fn exec_shows_each_tool_call_and_its_outcome_on_stderr() {
    let env = TestEnv::new(Wire::Chat, script());
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "All done.\n");
    let err = stderr(&output);
    let lines: Vec<&str> = err.lines().collect();
    let at = |text: &str| {
        lines.iter().position(|line| line.contains(text)).unwrap_or_else(|| panic!("{text}: {err}"))
    };
    assert!(at("▸ shell echo fine") < at("✓ shell"), "{err}");
    assert!(at("▸ shell ls no-such-dir") < at("✗ shell failed: Exit code: 2"), "{err}");
    // Ask mode with no one to ask: the write is refused, and stderr says so.
    assert!(at("▸ write_file a.txt") < at("✗ write_file not run: it needs approval"), "{err}");
}

#[test]
fn quiet_silences_progress_and_stdout_does_not_change() {
    let env = TestEnv::new(Wire::Chat, script());
    let output = env.kestrel(&["exec", "--mode", "ask", "--quiet", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "All done.\n");
    assert!(!stderr(&output).contains("shell"), "{}", stderr(&output));

    // With --json, progress goes to stderr and stdout holds JSON lines only.
    for quiet in [false, true] {
        let env = TestEnv::new(Wire::Chat, script());
        let mut args = vec!["exec", "--mode", "ask", "--json", "go"];
        if quiet {
            args.insert(1, "-q");
        }
        let output = env.kestrel(&args);
        assert!(output.status.success(), "{}", stderr(&output));
        for line in stdout(&output).lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("stdout is JSON lines only");
        }
        assert_eq!(stderr(&output).contains("▸ shell echo fine"), !quiet, "{}", stderr(&output));
    }
}
