//! The TUI's mode and model through the real binary on a pty: --mode over KESTREL_MODE over
//! config, kept by /new and per UI (not the daemon's), bad values refused naming what is
//! wrong, a model typed into the picker used by the worker, the picker listing the
//! catalog's models, and a /model choice kept by /new.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod catalog_support;
mod common;
mod tui_support;

use kestrel_testkit::{Key, Script, Step};
use tui_support::TuiTest;

#[test]
fn kestrel_mode_applies_to_the_session_after_new_too() {
    let script = Script::new([Step::text("First."), Step::text("Second.")]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"yolo\"");
    // A daemon already up without KESTREL_MODE: only the TUI knows it.
    let started = test.command(&["daemon", "start"]).output().unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let mut command = test.command(&[]);
    command.env("KESTREL_MODE", "read-only");
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("one");
    test.wait("First.");
    test.wait(" · read-only · ");
    test.send("/new");
    test.send("two");
    test.wait("Second.");
    let screen = test.settled();
    assert!(screen.contains(" · read-only · "), "the second session is read-only: {screen}");
    assert!(!screen.contains(" · yolo · "), "{screen}");
}

#[test]
fn the_mode_flag_wins_over_kestrel_mode_for_the_tuis_sessions() {
    let script = Script::new([Step::text("First.")]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"yolo\"");
    let started = test.command(&["daemon", "start"]).output().unwrap();
    assert!(started.status.success(), "{}", String::from_utf8_lossy(&started.stderr));
    let mut command = test.command(&["--mode", "read-only"]);
    command.env("KESTREL_MODE", "auto");
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("one");
    test.wait("First.");
    test.wait(" · read-only · ");
}

#[test]
fn bad_mode_and_model_flags_are_refused_clearly() {
    let test = TuiTest::new(Script::new([]));
    let output = test.command(&["--mode", "careful"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("careful") && stderr.contains("read-only"), "{stderr}");
    let output = test.command(&["--model", "gpt"]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`gpt` is not PROVIDER/MODEL"), "{stderr}");
}

#[test]
fn the_model_picker_takes_a_model_it_does_not_list_and_the_worker_uses_it() {
    let mut test = TuiTest::new(Script::new([Step::text("Hi from the other model.")]));
    test.start(&[]);
    test.send("/model");
    test.wait("Model");
    test.type_text("scripted/other-model");
    test.wait("use scripted/other-model");
    for _ in 0..3 {
        test.press(Key::Down);
    }
    test.wait("› use scripted/other-model");
    test.press(Key::Enter);
    test.wait(" scripted/other-model · ");
    test.send("hello");
    test.wait("Hi from the other model.");
    let sent = &test.env.requests()[0].body;
    assert_eq!(sent["model"], "other-model", "the worker asked for it: {sent}");
}

#[test]
fn the_mode_of_the_ui_that_started_the_daemon_is_not_every_later_uis() {
    let script = Script::new([Step::text("First."), Step::text("Second.")]);
    let mut test = TuiTest::new(script).with_config_first("mode = \"yolo\"");
    // No daemon yet: this UI starts it, with KESTREL_MODE in its environment.
    let mut command = test.command(&[]);
    command.env("KESTREL_MODE", "read-only");
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("one");
    test.wait("First.");
    test.wait(" · read-only · ");
    let mut first = test.pty.take().unwrap();
    tui_support::signal(first.pid().unwrap(), libc::SIGTERM);
    first.wait_exit(tui_support::WAIT).unwrap();
    // A later UI without KESTREL_MODE gets the config's mode, not the first UI's.
    let command = test.command(&[]);
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("two");
    test.wait("Second.");
    let screen = test.wait(" · yolo · ");
    assert!(!screen.contains(" · read-only · "), "{screen}");
}

#[test]
fn a_bad_kestrel_mode_is_refused_naming_the_variable() {
    let test = TuiTest::new(Script::new([]));
    let mut command = test.command(&[]);
    command.env("KESTREL_MODE", "readonly");
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("KESTREL_MODE") && stderr.contains("`readonly`"), "{stderr}");
    assert!(stderr.contains("read-only, ask, auto or yolo"), "{stderr}");
    // --mode wins: the variable is not even read.
    let output = test.command(&["--mode", "ask"]).env("KESTREL_MODE", "readonly").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("KESTREL_MODE"), "{stderr}");
}

#[test]
fn the_model_picker_lists_the_catalogs_models_and_new_keeps_the_choice() {
    let script = Script::new([Step::text("First."), Step::text("Second.")]);
    let mut test = TuiTest::new(script);
    let catalog = catalog_support::CatalogServer::start(
        r#"{"scripted": {"id": "scripted", "models": {
            "test-model": {"id": "test-model"}, "other-model": {"id": "other-model"}}}}"#,
    );
    let cached = test
        .command(&["models", "scripted", "--refresh"])
        .env("KESTREL_CATALOG_URL", &catalog.url)
        .output()
        .unwrap();
    assert!(cached.status.success(), "{}", String::from_utf8_lossy(&cached.stderr));
    test.start(&[]);
    test.send("one");
    test.wait("First.");
    test.send("/model");
    // Listed from the (cached) catalog, not only the current model.
    test.wait("scripted/other-model");
    test.type_text("other-model");
    test.wait("› scripted/other-model");
    test.press(Key::Enter);
    test.wait(" scripted/other-model · ");
    test.send("/new");
    test.send("two");
    test.wait("Second.");
    let requests = test.env.requests();
    let last = &requests.last().unwrap().body;
    assert_eq!(last["model"], "other-model", "the new session kept the choice: {last}");
    assert!(test.settled().contains(" scripted/other-model · "));
}

#[test]
fn the_model_picker_adds_the_models_the_provider_lists() {
    let mut test = TuiTest::new(Script::new([Step::text("First.")]));
    // Catalog fetching on (a loopback catalog): the provider's own list is asked too.
    let catalog = catalog_support::CatalogServer::start(catalog_support::CATALOG);
    let mut command = test.command(&[]);
    command.env("KESTREL_CATALOG_URL", &catalog.url);
    test.start_command(&command, tui_support::ROWS, tui_support::COLS);
    test.send("one");
    test.wait("First.");
    test.send("/model");
    // The scripted server's GET /models lists `scripted-model`.
    test.wait("scripted/scripted-model");
    let asked = test.env.requests().iter().any(|request| request.method == "GET");
    assert!(asked, "the provider's list was asked");
}
