//! `task` calls through a real session with a stand-in subagent host: the calls of one
//! response run side by side up to `[agent] max_subagents`, each child is asked for
//! with the parent's id, cwd and model and a mode no higher than the parent's, the
//! answers go back to the model, and what the children spent is in the turn's usage but
//! not in the parent's record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestHome;
use futures_util::future::BoxFuture;
use kestrel_agent::{
    AgentEvent, ChildOutcome, ChildRequest, ChildSession, SubagentHost, Unattended, open_session,
};
use kestrel_protocol::{Mode, RecordItem, SessionId, StopReason, Usage};
use kestrel_store::SessionIndex;
use kestrel_testkit::{Script, ScriptedServer, ScriptedToolCall, Step};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Children that wait until `target` of them ran at once (bounded), then answer.
struct StandInHost {
    target: usize,
    state: Arc<Mutex<Counts>>,
    requests: Mutex<Vec<ChildRequest>>,
}

#[derive(Default)]
struct Counts {
    running: usize,
    most: usize,
}

struct StandInChild {
    id: SessionId,
    prompt: String,
    target: usize,
    state: Arc<Mutex<Counts>>,
}

impl SubagentHost for StandInHost {
    fn spawn(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn ChildSession>, String>> {
        self.requests.lock().unwrap().push(request.clone());
        let child = StandInChild {
            id: SessionId::new(),
            prompt: request.prompt,
            target: self.target,
            state: self.state.clone(),
        };
        Box::pin(async move { Ok(Box::new(child) as Box<dyn ChildSession>) })
    }
}

impl ChildSession for StandInChild {
    fn id(&self) -> &SessionId {
        &self.id
    }

    fn finish(
        self: Box<Self>,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<ChildOutcome, String>> {
        Box::pin(async move {
            {
                let mut state = self.state.lock().unwrap();
                state.running += 1;
                state.most = state.most.max(state.running);
            }
            let reached = tokio::time::timeout(Duration::from_secs(10), async {
                while self.state.lock().unwrap().most < self.target {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await;
            self.state.lock().unwrap().running -= 1;
            reached.map_err(|_| "the other children never ran alongside".to_string())?;
            Ok(ChildOutcome {
                session_id: self.id,
                stop_reason: StopReason::EndTurn,
                final_text: format!("answer to {}", self.prompt),
                error: None,
                usage: Usage {
                    input_tokens: 100,
                    output_tokens: 10,
                    cost: 0.25,
                    ..Usage::default()
                },
                requests: 2,
            })
        })
    }
}

async fn run_three_tasks(max_subagents: u32, parent_mode: Mode) -> (Arc<StandInHost>, Vec<String>) {
    kestrel_model::install_crypto_provider();
    let task = |n: u32| {
        ScriptedToolCall::new(
            "task",
            json!({"description": format!("part {n}"), "prompt": format!("brief {n}"), "mode": "auto"}),
        )
    };
    let server = ScriptedServer::start(Script::new([
        Step::tool_calls(vec![task(1), task(2), task(3)]),
        Step::text("all parts done"),
    ]))
    .unwrap();
    let test = TestHome::new(
        &server,
        // No catalog or provider-list fetch: the test counts the server's requests.
        &format!(
            "catalog_url = \"off\"\n[providers.scripted]\nbase_url = \"{{base_url}}\"\nwire_api = \"chat\"\n\n[agent]\nmax_subagents = {max_subagents}\n"
        ),
    );
    let (home, cwd) = (test.home.clone(), test.cwd.clone());
    let launch = test.launch("scripted/m", parent_mode);
    let host = Arc::new(StandInHost {
        target: max_subagents.min(3) as usize,
        state: Arc::default(),
        requests: Mutex::new(Vec::new()),
    });
    let mut session = open_session(&launch, None, Arc::new(Unattended)).unwrap();
    session.set_subagent_host(host.clone());
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let sink = move |event: AgentEvent| seen.lock().unwrap().push(event);
    let result = tokio::time::timeout(
        Duration::from_secs(60),
        session.run_turn("do the three parts", &sink, &CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(result.final_text, "all parts done");
    // The children's spending is in the turn's totals (the stand-in model's own default
    // usage is 12 in, 8 out per request).
    assert_eq!(result.usage.input_tokens, 3 * 100 + 2 * 12);
    assert!((result.usage.cost - 0.75).abs() < 1e-12);

    for request in host.requests.lock().unwrap().iter() {
        assert_eq!(&request.parent_id, session.id());
        assert_eq!(request.cwd, cwd);
        assert_eq!(request.model, "scripted/m");
    }
    let events = events.lock().unwrap();
    let started = events.iter().filter(|e| matches!(e, AgentEvent::SubagentStarted { .. })).count();
    let finished =
        events.iter().filter(|e| matches!(e, AgentEvent::SubagentFinished { .. })).count();
    assert_eq!((started, finished), (3, 3));

    // Only the parent's own requests have usage items in its record.
    let record = SessionIndex::latest(&home, None).unwrap().path;
    let entries = kestrel_store::read_record(&record).unwrap().entries;
    let usage_items = entries.iter().filter(|e| matches!(e.item, RecordItem::Usage { .. })).count();
    assert_eq!(usage_items, 2);

    let requests = server.requests();
    assert!(requests[0].body.to_string().contains(r#""name":"task""#));
    let last = requests[1].body.to_string();
    let answers = (1..=3).map(|n| format!("answer to brief {n}")).collect::<Vec<_>>();
    for answer in &answers {
        assert!(last.contains(answer), "{answer} missing from {last}");
    }
    assert!(last.contains("2 requests, 110 tokens, $0.2500]"), "{last}");
    (host, answers)
}

#[tokio::test]
async fn task_calls_of_one_response_run_side_by_side() {
    let (host, _) = run_three_tasks(4, Mode::Yolo).await;
    assert_eq!(host.state.lock().unwrap().most, 3);
    // Asked for auto, under a yolo parent: auto.
    assert!(host.requests.lock().unwrap().iter().all(|r| r.mode == Mode::Auto));
}

#[tokio::test]
async fn at_most_max_subagents_run_at_once_and_never_above_the_parents_mode() {
    let (host, _) = run_three_tasks(2, Mode::Ask).await;
    assert_eq!(host.state.lock().unwrap().most, 2);
    // Asked for auto, under an ask parent: ask.
    assert!(host.requests.lock().unwrap().iter().all(|r| r.mode == Mode::Ask));
}
