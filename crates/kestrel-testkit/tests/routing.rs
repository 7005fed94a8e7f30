//! Routing steps to requests (`Step::when`): by the request's model and by text in its
//! body, each route consumed in order, faults counted per step; a script without `when`
//! still plays strictly in order.
#![allow(clippy::expect_used)] // test code: a failed expectation is a failed test

mod support;

use kestrel_testkit::{Fault, SCRIPT_EXHAUSTED, Script, ScriptedServer, Step};
use serde_json::{Value, json};
use support::{RawResponse, post};

fn start(steps: Vec<Step>) -> ScriptedServer {
    ScriptedServer::start(Script::new(steps)).expect("server starts")
}

/// A non-streaming chat request for `model` whose one user message is `text`.
fn ask(server: &ScriptedServer, model: &str, text: &str) -> RawResponse {
    let body = json!({
        "model": model,
        "stream": false,
        "messages": [{"role": "user", "content": text}],
    });
    post(server, "chat/completions", &body)
}

/// The answer's text, or the error message of a failed request.
fn answer(response: &RawResponse) -> String {
    let body: Value = response.json();
    match body["choices"][0]["message"]["content"].as_str() {
        Some(text) => text.to_owned(),
        None => format!("HTTP {}: {}", response.status, body["error"]["message"]),
    }
}

#[test]
fn steps_go_to_the_requests_of_their_model_in_script_order() {
    let server = start(vec![
        Step::text("impl 1").when(Some("impl"), None),
        Step::text("review 1").when(Some("review"), None),
        Step::text("impl 2").when(Some("impl"), None),
        Step::text("review 2").when(Some("review"), None),
    ]);
    assert_eq!(answer(&ask(&server, "review", "x")), "review 1");
    assert_eq!(answer(&ask(&server, "review", "x")), "review 2");
    assert_eq!(answer(&ask(&server, "impl", "x")), "impl 1");
    assert_eq!(answer(&ask(&server, "impl", "x")), "impl 2");
    assert_eq!(server.remaining(), 0);
}

#[test]
fn contains_routes_by_text_anywhere_in_the_body() {
    let server = start(vec![
        Step::text("parse").when(Some("impl"), Some("task=parse role=implementer")),
        Step::text("load").when(Some("impl"), Some("task=load role=implementer")),
        Step::text("quoted").when(None, Some(r#""content":"say \"hi\"""#)),
    ]);
    let load = "[kestrel swarm] run=r1 task=load role=implementer attempt=1";
    assert_eq!(answer(&ask(&server, "impl", load)), "load");
    // The model must match too.
    let parse = "[kestrel swarm] run=r1 task=parse role=implementer attempt=1";
    let refused = ask(&server, "review", parse);
    assert_eq!(refused.status, 500);
    assert_eq!(answer(&ask(&server, "impl", parse)), "parse");
    assert_eq!(answer(&ask(&server, "any", r#"say "hi""#)), "quoted");
}

#[test]
fn a_request_no_step_is_for_gets_the_exhausted_500_naming_its_model() {
    let server = start(vec![Step::text("later").when(Some("impl"), None)]);
    let response = ask(&server, "review", "x");
    assert_eq!(response.status, 500);
    let message = response.json()["error"]["message"].as_str().expect("message").to_owned();
    assert!(message.starts_with(SCRIPT_EXHAUSTED), "{message}");
    assert!(message.contains("model `review`"), "{message}");
    assert_eq!(server.remaining(), 1, "the step waits for its own request");
    assert_eq!(answer(&ask(&server, "impl", "x")), "later");
}

#[test]
fn a_status_fault_counts_its_failures_per_step() {
    let failing = Step::text("impl at last").when(Some("impl"), None).with_fault(Fault::Status {
        status: 503,
        retry_after_secs: None,
        message: None,
        times: Some(2),
    });
    let server = start(vec![failing, Step::text("review").when(Some("review"), None)]);
    assert_eq!(ask(&server, "impl", "x").status, 503);
    // Another route's request in between neither resets nor uses the count.
    assert_eq!(answer(&ask(&server, "review", "x")), "review");
    assert_eq!(ask(&server, "impl", "x").status, 503);
    assert_eq!(answer(&ask(&server, "impl", "x")), "impl at last");
}

#[test]
fn a_script_without_when_plays_in_order_whatever_the_request() {
    let server = start(vec![
        Step::text("one").with_fault(Fault::Status {
            status: 429,
            retry_after_secs: None,
            message: None,
            times: None,
        }),
        Step::text("two"),
        Step::text("three"),
    ]);
    assert_eq!(ask(&server, "a", "x").status, 429);
    assert_eq!(answer(&ask(&server, "b", "y")), "one");
    assert_eq!(answer(&ask(&server, "c", "z")), "two");
    assert_eq!(answer(&ask(&server, "a", "x")), "three");
    let response = ask(&server, "a", "x");
    assert_eq!(response.json()["error"]["message"], SCRIPT_EXHAUSTED);
}

#[test]
fn a_step_without_when_serves_whichever_request_reaches_it_first() {
    let server = start(vec![
        Step::text("routed").when(Some("impl"), None),
        Step::text("anyone"),
        Step::text("routed 2").when(Some("impl"), None),
    ]);
    assert_eq!(answer(&ask(&server, "review", "x")), "anyone");
    assert_eq!(answer(&ask(&server, "impl", "x")), "routed");
    assert_eq!(answer(&ask(&server, "impl", "x")), "routed 2");
}

#[test]
fn json_scripts_take_when_and_refuse_unknown_fields_in_it() {
    let script = Script::from_json(
        r#"[{"when": {"model": "impl", "contains": "task=parse"}, "reply": {"text": "ok"}},
            {"reply": {"text": "any"}}]"#,
    )
    .expect("a routed script loads");
    assert_eq!(script.steps[0], Step::text("ok").when(Some("impl"), Some("task=parse")));
    assert_eq!(script.steps[1].when, None);
    let error = Script::from_json(r#"[{"when": {"modle": "x"}, "reply": {"text": "ok"}}]"#)
        .expect_err("a typo in when is refused");
    assert!(error.to_string().contains("modle"), "{error}");
}
