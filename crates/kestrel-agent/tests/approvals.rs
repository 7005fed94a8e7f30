//! Each approval path through a real session in `ask` mode (scripted model server,
//! scripted answers): allow once asks again next time, allow always covers the same
//! command prefix or file for the rest of the session, allow-always-and-save also
//! writes the user's config, and a denial's reason goes back to the model.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestHome;
use futures_util::future::BoxFuture;
use kestrel_agent::{AgentEvent, ApprovalDecision, ApprovalRequest, Approver, open_session};
use kestrel_protocol::{Mode, RecordItem};
use kestrel_store::{Config, SessionIndex};
use kestrel_testkit::{Script, ScriptedServer, Step};
use kestrel_tools::permission::AllowRule;
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Answers from a list, and keeps every request it got.
struct ScriptedApprover {
    answers: Mutex<VecDeque<ApprovalDecision>>,
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for ScriptedApprover {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'_, ApprovalDecision> {
        self.seen.lock().unwrap().push(request);
        let answer = self.answers.lock().unwrap().pop_front().expect("an answer for every request");
        Box::pin(std::future::ready(answer))
    }
}

fn shell(command: &str) -> Step {
    Step::tool_call("shell", json!({ "command": command }))
}

#[tokio::test]
async fn every_approval_answer_does_what_it_says() {
    let server = ScriptedServer::start(Script::new([
        shell("touch once.txt"),
        shell("touch once.txt"),
        shell("mkdir -p d && touch d/x"),
        shell("touch d/x"),
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "1"})),
        Step::tool_call("write_file", json!({"path": "notes.txt", "content": "2"})),
        Step::text("done"),
    ]))
    .unwrap();
    let test = TestHome::new(
        &server,
        "# the user's own file\n[providers.scripted]\nbase_url = \"{base_url}\"\nwire_api = \"chat\"\n",
    );
    let (home, cwd, config_file) = (test.home.clone(), test.cwd.clone(), test.config_file.clone());
    let launch = test.launch("scripted/m", Mode::Ask);
    let approver = Arc::new(ScriptedApprover {
        answers: Mutex::new(VecDeque::from([
            ApprovalDecision::AllowOnce,
            ApprovalDecision::Deny { reason: Some("not twice".into()) },
            ApprovalDecision::AllowAlways,
            ApprovalDecision::AllowAlwaysAndSave,
        ])),
        seen: Mutex::new(Vec::new()),
    });
    let mut session = open_session(&launch, None, approver.clone()).unwrap();
    let sink = |_event: AgentEvent| {};
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        session.run_turn("go", &sink, &CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(result.final_text, "done");

    let seen = approver.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "covered calls must not ask: {seen:#?}");
    assert!(seen[0].summary.starts_with("run `touch once.txt`"), "{}", seen[0].summary);
    // "Always" offers the whole command, not every `touch`.
    assert_eq!(seen[0].always, [AllowRule::CommandPrefix("touch once.txt".into())]);
    assert_eq!(seen[1].tool_name, "shell");
    assert_eq!(
        seen[2].always,
        [
            AllowRule::CommandPrefix("mkdir -p d".into()),
            AllowRule::CommandPrefix("touch d/x".into())
        ]
    );
    assert_eq!(seen[3].summary, "write notes.txt");
    assert_eq!(seen[3].always, [AllowRule::Path(cwd.join("notes.txt"))]);

    let record = SessionIndex::latest(&home, None).unwrap().path;
    let results: Vec<(String, bool)> = kestrel_store::read_record(&record)
        .unwrap()
        .entries
        .into_iter()
        .filter_map(|entry| match entry.item {
            RecordItem::ToolResult { output, is_error, .. } => Some((output, is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 6);
    assert!(!results[0].1, "{results:?}");
    assert!(results[1].1 && results[1].0 == "the user denied `shell`: not twice", "{results:?}");
    assert!(results[2..].iter().all(|(_, is_error)| !is_error), "{results:?}");
    assert!(cwd.join("d/x").exists());
    assert_eq!(std::fs::read_to_string(cwd.join("notes.txt")).unwrap(), "2");

    // "Always and save" went to the user's config, scoped to this project, which still loads.
    let text = std::fs::read_to_string(&config_file).unwrap();
    assert!(text.starts_with("# the user's own file\n"), "{text}");
    assert!(
        text.contains(&format!("allow_write = [\"{}\"]", cwd.join("notes.txt").display())),
        "{text}"
    );
    let config = Config::load(&home, &cwd).unwrap();
    assert!(config.permissions.allow_write.is_empty());
    assert_eq!(config.permissions.projects[0].path, cwd);
    assert_eq!(config.permissions.projects[0].allow_write, [cwd.join("notes.txt")]);
}
