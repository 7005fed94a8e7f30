//! The UI opened with no model configured: after the first frame it looks for API keys
//! and local model servers (here the scripted server as Ollama; the other probes moved
//! to closed loopback ports through the test-only KESTREL_PROBE_PORTS), shows a picker
//! of what it found, and writes the choice to config.toml; the session then uses it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod tui_support;

use kestrel_testkit::{Key, Script, Step};
use tui_support::{COLS, ROWS, TuiTest};

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn with_no_model_a_picker_offers_what_was_found_and_saves_the_choice() {
    let mut test = TuiTest::new(Script::new([Step::text("Hello from the local model.")]));
    let config = test.env.home.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[providers.ollama]\nbase_url = \"{}\"\n", test.env.server.base_url()),
    )
    .unwrap();
    let mut command = test.command(&[]);
    for key in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY"] {
        command.env_remove(key);
    }
    let (a, b, c) = (closed_port(), closed_port(), closed_port());
    command.env("KESTREL_PROBE_PORTS", format!("lmstudio={a},llamacpp={b},vllm={c}"));
    test.start_command(&command, ROWS, COLS);

    let screen = test.wait("No model configured: choose one (saved to config.toml)");
    assert!(screen.contains("ollama/scripted-model"), "{screen}");
    assert!(screen.contains("Ollama answers at http://127.0.0.1:"), "{screen}");
    test.press(Key::Enter);
    test.wait("model = \"ollama/scripted-model\" saved to");
    let saved = std::fs::read_to_string(&config).unwrap();
    assert!(saved.starts_with("model = \"ollama/scripted-model\"\n[providers.ollama]"), "{saved}");

    test.send("hi");
    test.wait("Hello from the local model.");
    let requests: Vec<_> =
        test.env.requests().into_iter().filter(|request| request.method == "POST").collect();
    assert_eq!(requests[0].body["model"], "scripted-model");
}
