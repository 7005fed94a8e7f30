//! A call of a tool that does not exist is answered at once with the list of tools: it
//! is never put to the permission policy (no approval asked) and takes no checkpoint
//! snapshot (each one runs git several times).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, body_text, stderr, stdout};
use kestrel_testkit::{Script, Step};
use serde_json::json;

fn unknown_call_then_answer() -> Script {
    Script::new([Step::tool_call("launch_rockets", json!({"count": 3})), Step::text("done")])
}

#[test]
fn an_unknown_tool_takes_no_checkpoint_snapshot() {
    let env = TestEnv::new(Wire::Chat, unknown_call_then_answer());
    let output = env.kestrel(&["exec", "--mode", "auto", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "done\n");
    assert!(body_text(&env.requests()[1]).contains("unknown tool `launch_rockets`"));
    let checkpoints = env.home.path().join("checkpoints");
    assert!(!checkpoints.exists(), "a snapshot was taken for an unknown tool: {checkpoints:?}");
}

#[test]
fn an_unknown_tool_in_ask_mode_is_not_put_to_the_user() {
    let env = TestEnv::new(Wire::Chat, unknown_call_then_answer());
    let output = env.kestrel(&["exec", "--mode", "ask", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let answer = body_text(&env.requests()[1]);
    assert!(answer.contains("unknown tool `launch_rockets`; available tools:"), "{answer}");
    assert!(answer.contains("read_file"), "{answer}");
}
