//! Successful responses from the scripted model server over real HTTP, for each of the
//! three wire APIs: text, tool calls, reasoning (and sending it back), usage.

mod common;

use common::{WIRES, client_for, collect, options, request, text_of};
use kestrel_model::{
    FinishReason, Message, ReasoningEffort, StreamEvent, TokenUsage, ToolCall, WireApi,
};
use kestrel_testkit::{Script, ScriptedServer, ScriptedUsage, Step};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn text_streams_on_every_wire() {
    for wire in WIRES {
        let server =
            ScriptedServer::start(Script::new([Step::text("Hello there, world!")])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert_eq!(text_of(&events), "Hello there, world!", "{wire:?}");
        assert!(
            events.iter().filter(|e| matches!(e, StreamEvent::TextDelta(_))).count() > 1,
            "{wire:?}: text should arrive in pieces"
        );
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Completed { finish_reason: FinishReason::Stop }),
            "{wire:?}"
        );
        assert!(stream.next().await.is_none(), "{wire:?}: nothing after Completed");

        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{wire:?}");
        let logged = &requests[0];
        assert_eq!(logged.method, "POST");
        assert_eq!(
            logged.path,
            match wire {
                WireApi::Chat => "/v1/chat/completions",
                WireApi::Responses => "/v1/responses",
                WireApi::Anthropic => "/v1/messages",
            }
        );
        assert_eq!(logged.body["stream"], json!(true), "{wire:?}");
        match wire {
            WireApi::Chat | WireApi::Responses => {
                assert_eq!(logged.header("authorization"), Some("Bearer sk-test-key"));
                assert_eq!(logged.header("x-api-key"), None);
            }
            WireApi::Anthropic => {
                assert_eq!(logged.header("x-api-key"), Some("sk-test-key"));
                assert_eq!(logged.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(logged.header("authorization"), None);
            }
        }
        if wire == WireApi::Responses {
            assert_eq!(logged.body["store"], json!(false));
            assert!(logged.body.get("previous_response_id").is_none());
        }
    }
}

#[tokio::test]
async fn tool_calls_stream_with_their_arguments_on_every_wire() {
    for wire in WIRES {
        let script = Script::new([Step::tool_call("read_file", json!({"path": "src/main.rs"}))]);
        let server = ScriptedServer::start(script).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");

        let started: Vec<(usize, &str, &str)> = events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::ToolCallStarted { index, id, name } = e {
                    Some((*index, id.as_str(), name.as_str()))
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(started.len(), 1, "{wire:?}");
        assert_eq!((started[0].0, started[0].2), (0, "read_file"));
        let deltas: String = events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::ToolCallArgumentsDelta { index: 0, delta } = e {
                    Some(delta.as_str())
                } else {
                    None
                }
            })
            .collect();
        let completed: Vec<&ToolCall> = events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::ToolCallCompleted { index: 0, call } = e {
                    Some(call)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(completed.len(), 1, "{wire:?}");
        let call = completed[0];
        assert_eq!(call.id, started[0].1, "{wire:?}");
        assert_eq!(call.name, "read_file");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&call.arguments).unwrap(),
            json!({"path": "src/main.rs"})
        );
        assert_eq!(deltas, call.arguments, "{wire:?}: deltas join to the arguments");
        assert_eq!(
            events.last(),
            Some(&StreamEvent::Completed { finish_reason: FinishReason::ToolCalls }),
            "{wire:?}"
        );
        let body = &server.requests()[0].body;
        assert!(
            body.get("tools").is_some_and(|t| t.as_array().is_some_and(|t| t.len() == 1)),
            "{wire:?}"
        );
    }
}

#[tokio::test]
async fn reasoning_streams_and_goes_back_with_the_next_request_on_every_wire() {
    for wire in WIRES {
        let script = Script::new([
            Step::tool_call("read_file", json!({"path": "a"}))
                .with_reasoning("First I read the file."),
            Step::text("Done."),
        ]);
        let server = ScriptedServer::start(script).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let mut first = request();
        first.reasoning = Some(ReasoningEffort::High);
        let mut stream = client.stream(&first, &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");

        let reasoning_text: String = events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::ReasoningDelta(text) = e { Some(text.as_str()) } else { None }
            })
            .collect();
        assert_eq!(reasoning_text, "First I read the file.", "{wire:?}");
        let reasoning = events
            .iter()
            .find_map(|e| {
                if let StreamEvent::ReasoningCompleted(reasoning) = e {
                    Some(reasoning.clone())
                } else {
                    None
                }
            })
            .unwrap_or_else(|| panic!("{wire:?}: no ReasoningCompleted"));
        assert_eq!(reasoning.text, "First I read the file.", "{wire:?}");
        let call = events
            .iter()
            .find_map(|e| {
                if let StreamEvent::ToolCallCompleted { call, .. } = e {
                    Some(call.clone())
                } else {
                    None
                }
            })
            .unwrap();

        // The follow-up carries the reasoning back in the wire's own form.
        let mut second = first.clone();
        second.messages.push(Message::Assistant {
            text: String::new(),
            reasoning: Some(reasoning.clone()),
            tool_calls: vec![call.clone()],
        });
        second.messages.push(Message::ToolResult {
            call_id: call.id.clone(),
            content: "A".into(),
            is_error: false,
        });
        let mut stream = client.stream(&second, &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert_eq!(text_of(&events), "Done.");

        let requests = server.requests();
        let body = &requests[1].body;
        match wire {
            WireApi::Chat => {
                assert_eq!(
                    body["messages"][2]["reasoning_content"],
                    json!("First I read the file.")
                );
                assert_eq!(body["messages"][3]["tool_call_id"], json!(call.id));
            }
            WireApi::Responses => {
                assert_eq!(requests[0].body["include"], json!(["reasoning.encrypted_content"]));
                let item = &body["input"][1];
                assert_eq!(item["type"], json!("reasoning"));
                assert!(
                    item["encrypted_content"].as_str().is_some_and(|e| !e.is_empty()),
                    "{item}"
                );
                assert!(item.get("id").is_none());
                assert_eq!(body["input"][2]["type"], json!("function_call"));
                assert_eq!(body["input"][3]["type"], json!("function_call_output"));
            }
            WireApi::Anthropic => {
                assert_eq!(requests[0].body["thinking"]["type"], json!("enabled"));
                let block = &body["messages"][1]["content"][0];
                assert_eq!(block["type"], json!("thinking"));
                assert_eq!(block["thinking"], json!("First I read the file."));
                assert!(block["signature"].as_str().is_some_and(|s| !s.is_empty()), "{block}");
                assert_eq!(body["messages"][2]["content"][0]["type"], json!("tool_result"));
            }
        }
    }
}

#[tokio::test]
async fn usage_is_mapped_from_every_wire() {
    let scripted = ScriptedUsage {
        input_tokens: 1000,
        cached_input_tokens: 400,
        output_tokens: 120,
        reasoning_tokens: 30,
    };
    for wire in WIRES {
        let server =
            ScriptedServer::start(Script::new([Step::text("ok").with_usage(scripted)])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let mut stream = client.stream(&request(), &CancellationToken::new()).await.unwrap();
        let (events, error) = collect(&mut stream).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        let usage = events
            .iter()
            .find_map(|e| if let StreamEvent::Usage(usage) = e { Some(*usage) } else { None });
        let reasoning_tokens = match wire {
            WireApi::Chat | WireApi::Responses => 30,
            // Anthropic does not report reasoning tokens separately.
            WireApi::Anthropic => 0,
        };
        assert_eq!(
            usage,
            Some(TokenUsage {
                input_tokens: 1000,
                cached_input_tokens: 400,
                output_tokens: 120,
                reasoning_tokens,
                cache_write_tokens: 0
            }),
            "{wire:?}"
        );
    }
}

#[tokio::test]
async fn complete_text_collects_the_answer_without_tools() {
    for wire in WIRES {
        let server = ScriptedServer::start(Script::new([Step::text("Fix the parser")])).unwrap();
        let client = client_for(&server.base_url(), wire, options(3).0);
        let (text, usage) =
            client.complete_text(&request(), &CancellationToken::new()).await.unwrap();
        assert_eq!(text, "Fix the parser", "{wire:?}");
        assert!(usage.output_tokens > 0, "{wire:?}");
        let body = &server.requests()[0].body;
        assert!(body.get("tools").is_none(), "{wire:?}: {body}");
    }
}

#[test]
fn client_futures_and_streams_can_move_between_threads() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<kestrel_model::ModelClient>();
    fn assert_send_type<T: Send>() {}
    assert_send_type::<kestrel_model::ResponseStream>();
    let client = client_for("http://127.0.0.1:1/v1", WireApi::Chat, options(1).0);
    let request = request();
    let cancel = CancellationToken::new();
    assert_send(&client.stream(&request, &cancel));
    assert_send(&client.complete_text(&request, &cancel));
}
