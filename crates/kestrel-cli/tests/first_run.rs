//! A first run with no model configured uses what the environment offers: API keys of
//! the built-in providers and OpenAI-compatible servers on this machine (probed on their
//! default ports; moved to the scripted server's, or to a closed one, through the
//! test-only KESTREL_PROBE_PORTS). One candidate is used and named on stderr; several or
//! none exit 2 with the list and the line of config that chooses. `kestrel doctor`
//! reports keys as set or not, never their values.

#![allow(clippy::unwrap_used)]

mod common;

use common::{TestEnv, Wire, stderr, stdout};
use kestrel_testkit::{Script, ScriptedServer, ServerOptions, Step};
use std::process::{Command, Output};

const KEYS: [&str; 3] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"];

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The local servers' probes: Ollama at `ollama` (or closed), the others closed.
fn probe_ports(ollama: Option<&ScriptedServer>) -> String {
    let ollama = ollama.map_or_else(closed_port, |server| server.address().port());
    format!(
        "ollama={ollama},lmstudio={},llamacpp={},vllm={}",
        closed_port(),
        closed_port(),
        closed_port()
    )
}

/// `kestrel ARGS` with no key in the environment but `keys`, and the probes at `ports`.
fn run(env: &TestEnv, args: &[&str], keys: &[(&str, &str)], ports: &str) -> Output {
    let mut command: Command = env.command(args);
    for key in KEYS {
        command.env_remove(key);
    }
    for (name, value) in keys {
        command.env(name, value);
    }
    command.env("KESTREL_PROBE_PORTS", ports).output().unwrap()
}

fn model_requests(server: &ScriptedServer) -> Vec<kestrel_testkit::LoggedRequest> {
    server.requests().into_iter().filter(|request| request.method == "POST").collect()
}

#[test]
fn a_local_server_alone_is_used_and_named_on_stderr() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("hello from local")]));
    // Ollama where the config says it is (the run goes there too); the rest closed.
    env.write_config(&format!("[providers.ollama]\nbase_url = \"{}\"\n", env.server.base_url()));
    let ports = probe_ports(None);
    let others = ports.split_once(',').unwrap().1;
    let output = run(&env, &["exec", "hi"], &[], others);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello from local\n");
    let said = stderr(&output);
    assert!(
        said.contains(
            "no model configured; using ollama/scripted-model (Ollama answers at http://127.0.0.1:"
        ),
        "{said}"
    );
    assert!(said.contains("model = \"ollama/scripted-model\""), "{said}");
    let requests = model_requests(&env.server);
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "scripted-model");
}

#[test]
fn a_key_alone_is_used_with_the_catalogs_default_model() {
    let env = TestEnv::new(Wire::Anthropic, Script::new([Step::text("hello from the key")]));
    // The provider's URL moved to loopback; no model chosen.
    env.write_config(&format!("[providers.anthropic]\nbase_url = \"{}\"\n", env.server.base_url()));
    let key = ("ANTHROPIC_API_KEY", "sk-ant-fake-first-run");
    let output = run(&env, &["exec", "hi"], &[key], &probe_ports(None));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "hello from the key\n");
    let said = stderr(&output);
    assert!(said.contains("using anthropic/claude-sonnet-"), "{said}");
    assert!(said.contains("(ANTHROPIC_API_KEY is set)"), "{said}");
    assert!(!said.contains("sk-ant-fake-first-run"), "the key is never said: {said}");
    let requests = model_requests(&env.server);
    let model = requests[0].body["model"].as_str().unwrap().to_owned();
    assert!(model.starts_with("claude-sonnet-"), "{model}");
}

#[test]
fn several_candidates_exit_2_listing_them_and_the_line_that_chooses() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("never")]));
    env.write_config("");
    let keys = [("ANTHROPIC_API_KEY", "sk-ant-fake"), ("OPENAI_API_KEY", "sk-openai-fake")];
    let output = run(&env, &["exec", "hi"], &keys, &probe_ports(Some(&env.server)));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("no model configured, and 3 are available:"), "{said}");
    for listed in ["anthropic/claude-sonnet-", "openai/gpt-", "ollama/scripted-model"] {
        assert!(said.contains(listed), "{listed}: {said}");
    }
    assert!(said.contains("ANTHROPIC_API_KEY is set") && said.contains("OPENAI_API_KEY is set"));
    assert!(said.contains("choose one with this line in"), "{said}");
    assert!(said.contains("\n  model = \"anthropic/claude-sonnet-"), "{said}");
    assert!(!said.contains("sk-ant-fake") && !said.contains("sk-openai-fake"), "{said}");
    assert!(model_requests(&env.server).is_empty(), "nothing was sent to a model");
}

#[test]
fn nothing_found_exits_2_with_the_line_that_chooses() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("never")]));
    env.write_config("");
    let output = run(&env, &["exec", "hi"], &[], &probe_ports(None));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let said = stderr(&output);
    assert!(said.contains("no model configured, and none found"), "{said}");
    assert!(
        said.contains("no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENROUTER_API_KEY is set"),
        "{said}"
    );
    assert!(said.contains("Ollama at http://127.0.0.1:"), "{said}");
    assert!(said.contains("model = \"PROVIDER/MODEL\""), "{said}");
    assert!(stdout(&output).is_empty());
}

#[test]
fn doctor_reports_keys_as_set_never_their_values() {
    let env = TestEnv::new(Wire::Anthropic, Script::default());
    env.write_config(&format!("[providers.anthropic]\nbase_url = \"{}\"\n", env.server.base_url()));
    let key = ("ANTHROPIC_API_KEY", "sk-ant-doctor-secret");
    let output = run(&env, &["doctor"], &[key], &probe_ports(Some(&env.server)));
    assert!(output.status.success(), "{}", stderr(&output));
    let report = stdout(&output);
    assert!(!report.contains("sk-ant-doctor-secret"), "{report}");
    assert!(!stderr(&output).contains("sk-ant-doctor-secret"), "{}", stderr(&output));
    assert!(report.contains("config.toml: ok"), "{report}");
    assert!(report.contains("ANTHROPIC_API_KEY set"), "{report}");
    assert!(report.contains("OPENAI_API_KEY not set"), "{report}");
    assert!(report.contains("none configured: 2 found"), "{report}");
    let anthropic = report.lines().find(|line| line.contains("anthropic ")).unwrap();
    assert!(anthropic.contains("answers (1 models)"), "{report}");
    let ollama = report.lines().find(|line| line.contains("ollama ")).unwrap();
    assert!(ollama.contains("answers (1 models)"), "{report}");
    let vllm = report.lines().find(|line| line.contains("vllm ")).unwrap();
    assert!(vllm.contains("not answering"), "{report}");
    assert!(report.contains("(no key: OPENAI_API_KEY not set)"), "{report}");
    for label in ["sandbox ", "daemon ", "disk "] {
        assert!(report.lines().any(|line| line.starts_with(label)), "{label}: {report}");
    }
    assert!(report.contains("daemon     not running"), "{report}");
}

#[test]
fn doctor_redacts_a_key_that_a_refusing_provider_echoes() {
    let secret = "sk-doctor-echoed-secret";
    let refusing = ScriptedServer::start_with(
        Script::default(),
        ServerOptions {
            models_error: Some((401, format!("Incorrect API key provided: {secret}"))),
            ..ServerOptions::default()
        },
    )
    .unwrap();
    let env = TestEnv::new(Wire::Chat, Script::default());
    // Two providers share the variable: it is listed once.
    env.write_config(&format!(
        "[providers.openai]\nbase_url = \"{}\"\n\
         [providers.alsoopenai]\nbase_url = \"{}\"\napi_key_env = \"OPENAI_API_KEY\"\n",
        refusing.base_url(),
        refusing.base_url()
    ));
    let output = run(&env, &["doctor"], &[("OPENAI_API_KEY", secret)], &probe_ports(None));
    let (report, errors) = (stdout(&output), stderr(&output));
    assert!(!report.contains(secret) && !errors.contains(secret), "{report}\n{errors}");
    let openai = report.lines().find(|line| line.contains("openai ")).unwrap();
    assert!(openai.contains("401") && openai.contains("[redacted]"), "{report}");
    assert_eq!(report.matches("OPENAI_API_KEY set").count(), 1, "{report}");
}

#[test]
fn doctor_says_where_a_config_error_is() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    env.write_config("modle = \"x/y\"\n");
    let output = run(&env, &["doctor"], &[], &probe_ports(None));
    assert_eq!(output.status.code(), Some(2));
    let report = stdout(&output);
    assert!(report.starts_with("config     ERROR: "), "{report}");
    assert!(report.contains("modle"), "{report}");
}
