//! Modes through the real binary: what `exec` runs, refuses or would ask about, in
//! read-only, ask (no one to ask: a clear denial, never a hang), auto (the OS sandbox:
//! a write outside the workspace fails, inside works) and yolo (it succeeds).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, stderr};
use kestrel_testkit::{Script, ScriptedToolCall, Step};
use serde_json::{Value, json};

/// The outputs of the record's tool results, in order.
fn tool_results(env: &TestEnv) -> Vec<(String, bool)> {
    env.record_items()
        .iter()
        .filter(|item| item["type"] == "tool_result")
        .map(|item| {
            (item["output"].as_str().unwrap().to_string(), item["is_error"] == Value::Bool(true))
        })
        .collect()
}

fn script(calls: Vec<ScriptedToolCall>) -> Script {
    let mut steps: Vec<Step> = calls.into_iter().map(|call| Step::tool_calls(vec![call])).collect();
    steps.push(Step::text("done"));
    Script::new(steps)
}

fn shell(command: &str) -> ScriptedToolCall {
    ScriptedToolCall::new("shell", json!({ "command": command }))
}

mod tui_support;
#[path = "../../kestrel-platform/tests/support/unconfined.rs"]
mod unconfined;

/// A directory outside /tmp (which every sandbox lets commands write), wherever the
/// checkout and the target dir live.
fn outside() -> tempfile::TempDir {
    unconfined::unconfined_scratch()
}

#[test]
fn ask_mode_without_anyone_to_ask_denies_at_once_and_runs_read_only_commands() {
    let env = TestEnv::new(
        Wire::Chat,
        script(vec![
            ScriptedToolCall::new("write_file", json!({"path": "a.txt", "content": "x"})),
            shell("touch b.txt"),
            shell("echo listed && ls"),
        ]),
    );
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && results[0].0.contains("approval: write a.txt"), "{results:?}");
    assert!(results[0].0.contains("no one is here to approve it"), "{results:?}");
    // No one answered, so no one "denied" it; in ask mode the other modes are named.
    assert!(results[0].0.starts_with("not run: ") && results[0].0.contains("unattended"));
    assert!(!results[0].0.contains("the user denied"), "{results:?}");
    assert!(results[0].0.contains("another --mode (auto:"), "{results:?}");
    assert!(results[1].1 && results[1].0.contains("run `touch b.txt`"), "{results:?}");
    assert!(!results[2].1 && results[2].0.contains("listed"), "{results:?}");
    assert!(!env.work.path().join("a.txt").exists() && !env.work.path().join("b.txt").exists());
}

#[test]
fn ask_mode_runs_what_the_users_config_allows() {
    let elsewhere = outside();
    let extra = elsewhere.path().join("extra.txt");
    let env = TestEnv::new(
        Wire::Chat,
        script(vec![
            shell("touch allowed.txt"),
            shell("rm -f x"),
            // A rule for a whole command covers that command, not more arguments.
            shell(&format!("touch allowed.txt {}", extra.display())),
        ]),
    );
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n[permissions]\nallow = [\"touch allowed.txt\"]\n"));
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(!results[0].1, "{results:?}");
    assert!(env.work.path().join("allowed.txt").exists());
    assert!(results[1].1 && results[1].0.contains("`rm -f x`"), "{results:?}");
    assert!(results[2].1 && results[2].0.contains("needs approval"), "{results:?}");
    assert!(!extra.exists(), "`touch allowed.txt` allowed more arguments");
}

#[test]
fn read_only_mode_runs_read_only_commands_and_refuses_the_rest_saying_why() {
    let env = TestEnv::new(
        Wire::Chat,
        script(vec![
            shell("cat keep.txt | wc -l"),
            shell("rm keep.txt"),
            shell("echo x > out.txt"),
            ScriptedToolCall::new("write_file", json!({"path": "w.txt", "content": "x"})),
        ]),
    );
    std::fs::write(env.work.path().join("keep.txt"), "1\n2\n").unwrap();
    let output = env.kestrel(&["exec", "--mode", "read-only", "look"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(!results[0].1 && results[0].0.contains('2'), "{results:?}");
    assert!(
        results[1].1
            && results[1].0.contains("read-only mode")
            && results[1].0.contains("`rm keep.txt`"),
        "{results:?}"
    );
    assert!(results[2].1 && results[2].0.contains("out.txt"), "{results:?}");
    assert!(results[3].1 && results[3].0.contains("read-only"), "{results:?}");
    assert!(env.work.path().join("keep.txt").exists());
    assert!(!env.work.path().join("out.txt").exists() && !env.work.path().join("w.txt").exists());
}

#[test]
fn auto_confines_shell_writes_to_the_workspace_and_yolo_does_not() {
    let elsewhere = outside();
    let target = elsewhere.path().join("escape.txt");
    let command = format!("echo escaped > {}", target.display());
    let env =
        TestEnv::new(Wire::Chat, script(vec![shell("echo inside > in.txt"), shell(&command)]));
    let output = env.kestrel(&["exec", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(!results[0].1, "{results:?}");
    assert_eq!(std::fs::read_to_string(env.work.path().join("in.txt")).unwrap(), "inside\n");
    assert!(results[1].1 && results[1].0.contains("sandbox"), "{results:?}");
    assert!(!target.exists(), "a sandboxed command wrote outside the workspace");

    let env = TestEnv::new(Wire::Chat, script(vec![shell(&command)]));
    let output = env.kestrel(&["exec", "--mode", "yolo", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!tool_results(&env)[0].1);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "escaped\n");
}

#[test]
fn auto_follows_the_network_setting() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let env = TestEnv::new(
        Wire::Chat,
        Script::new([
            Step::tool_call("shell", json!({"command": command})),
            Step::text("a"),
            Step::tool_call("shell", json!({"command": command})),
            Step::text("b"),
        ]),
    );
    let output = env.kestrel(&["exec", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n[sandbox]\nnetwork = true\n"));
    let output = env.kestrel(&["exec", "resume", "--last", "again"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && !results[0].0.contains("connected\n"), "network off: {results:?}");
    // The refused connect says why and how to allow it.
    assert!(results[0].0.contains("the network is off in the sandbox"), "{results:?}");
    assert!(results[0].0.contains("`[sandbox] network = true`"), "{results:?}");
    assert!(!results[1].1 && results[1].0.contains("connected"), "network on: {results:?}");
}

#[test]
fn auto_without_a_sandbox_asks_instead_of_running_unconfined() {
    let env = TestEnv::new(Wire::Chat, script(vec![shell("touch made.txt"), shell("ls")]));
    let output = env.command(&["exec", "go"]).env("KESTREL_SANDBOX", "none").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].0.contains("no sandbox available: turned off by KESTREL_SANDBOX=none"),
        "{results:?}"
    );
    assert!(results[0].0.contains("no one is here to approve it"), "{results:?}");
    // Already in auto: it does not suggest auto, nor say that a user denied it.
    assert!(!results[0].0.contains("auto:") && !results[0].0.contains("the user denied"));
    assert!(results[0].0.contains("with --mode yolo"), "{results:?}");
    // The missing sandbox is said once, on stderr (besides each refused call's progress line).
    let said = stderr(&output).matches("kestrel: no sandbox available").count();
    assert_eq!(said, 1, "{}", stderr(&output));
    assert!(!env.work.path().join("made.txt").exists(), "it ran without a sandbox");
    // Known read-only commands still run.
    assert!(!results[1].1, "{results:?}");
}

#[test]
fn saved_rules_apply_only_to_their_project() {
    let env =
        TestEnv::new(Wire::Chat, script(vec![shell("touch mine.txt"), shell("rm -f other.txt")]));
    let work = env.work_path();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!(
        "{config}\n[[permissions.project]]\npath = \"{}\"\nallow = [\"touch mine.txt\"]\n\n\
         [[permissions.project]]\npath = \"/elsewhere\"\nallow = [\"rm -f other.txt\"]\n",
        work.display()
    ));
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(!results[0].1 && work.join("mine.txt").exists(), "{results:?}");
    assert!(results[1].1 && results[1].0.contains("`rm -f other.txt`"), "{results:?}");

    // A project entry must name an absolute path: exit 2 naming the file.
    env.write_config(&format!("{config}\n[[permissions.project]]\npath = \"rel\"\n"));
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("must be an absolute path"), "{}", stderr(&output));
}

#[test]
fn web_fetch_is_refused_in_auto_when_the_network_is_off() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/", listener.local_addr().unwrap().port());
    let env = TestEnv::new(
        Wire::Chat,
        script(vec![ScriptedToolCall::new("web_fetch", json!({ "url": url }))]),
    );
    let output = env.kestrel(&["exec", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && results[0].0.contains("network access is off"), "{results:?}");
    listener.set_nonblocking(true).unwrap();
    assert!(listener.accept().is_err(), "web_fetch connected with the network off");
}

#[test]
fn read_only_git_in_a_repository_whose_config_runs_a_program_is_refused() {
    let env = TestEnv::new(Wire::Chat, script(vec![shell("git status"), shell("git log")]));
    let work = env.work_path();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git").args(args).current_dir(&work).status();
        assert!(status.unwrap().success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    let marker = work.join("hook-ran");
    let hook = work.join("hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    git(&["config", "core.fsmonitor", &hook.display().to_string()]);
    let output = env.kestrel(&["exec", "--mode", "read-only", "look"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    for (output, is_error) in &results {
        assert!(*is_error && output.contains("core.fsmonitor"), "{results:?}");
    }
    assert!(!marker.exists(), "the repository's fsmonitor hook ran in read-only mode");
}

#[test]
fn auto_file_tools_need_approval_for_git_hooks_and_project_config() {
    let calls = || {
        vec![
            ScriptedToolCall::new(
                "write_file",
                json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"}),
            ),
            ScriptedToolCall::new(
                "write_file",
                json!({"path": ".kestrel/config.toml", "content": "[agent]\n"}),
            ),
            ScriptedToolCall::new("write_file", json!({"path": "notes.txt", "content": "x"})),
        ]
    };
    let env = TestEnv::new(Wire::Chat, script(calls()));
    std::fs::create_dir_all(env.work.path().join(".git/hooks")).unwrap();
    let output = env.kestrel(&["exec", "--mode", "auto", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && results[0].0.contains("git metadata"), "{results:?}");
    assert!(results[0].0.contains("no one is here to approve it"), "{results:?}");
    assert!(results[1].1 && results[1].0.contains("project config"), "{results:?}");
    assert!(!results[2].1, "{results:?}");
    assert!(!env.work.path().join(".git/hooks/pre-commit").exists());
    assert!(!env.work.path().join(".kestrel/config.toml").exists());
    assert!(env.work.path().join("notes.txt").exists());

    let env = TestEnv::new(Wire::Chat, script(calls()));
    std::fs::create_dir_all(env.work.path().join(".git/hooks")).unwrap();
    let output = env.kestrel(&["exec", "--mode", "yolo", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(env.work.path().join(".git/hooks/pre-commit").exists());
}

/// Each of these ran `touch X` while judged read-only (the second review of issue 3).
#[test]
fn read_only_mode_runs_nothing_hidden_by_quoting_or_variables() {
    let commands = [
        "echo \"$'\" ; touch X ; echo \"'\"",
        "echo \"$\\\n(touch X)\"",
        "echo $\\\n{x:='$(touch X)'} $\\\n{x@P}",
        "echo \"`echo \\\" ' \\\" ; touch X ; \\\" ' \\\"`\"",
        "cat <<$'E\\x4fF'\nEOF\ntouch X\nEx4fF",
        "set -a; echo ${GIT_CONFIG_COUNT=1} ${GIT_CONFIG_KEY_0=core.fsmonitor} \
         \"${GIT_CONFIG_VALUE_0=touch X}\" >/dev/null; git status",
        "xxd -- -name X",
    ];
    let env = TestEnv::new(Wire::Chat, script(commands.iter().map(|c| shell(c)).collect()));
    let work = env.work_path();
    let status = std::process::Command::new("git").args(["init", "-q"]).current_dir(&work).status();
    assert!(status.unwrap().success());
    std::fs::write(work.join("-name"), "x").unwrap();
    let output = env.kestrel(&["exec", "--mode", "read-only", "look"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert_eq!(results.len(), commands.len(), "{results:?}");
    for ((output, is_error), command) in results.iter().zip(commands) {
        assert!(*is_error && output.contains("read-only mode"), "{command}: {output}");
    }
    assert!(!work.join("X").exists(), "a command hidden in a read-only one ran");
}

#[cfg(unix)]
#[test]
fn a_workdir_through_a_symlink_is_judged_where_the_command_runs() {
    let evil = outside();
    let evil_path = evil.path().canonicalize().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git").args(args).current_dir(&evil_path).status();
        assert!(status.unwrap().success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    let marker = evil_path.join("hook-ran");
    let hook = evil_path.join("hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    git(&["config", "core.fsmonitor", &hook.display().to_string()]);
    std::fs::create_dir(evil_path.join("sub")).unwrap();
    let in_link = |command: &str| {
        ScriptedToolCall::new("shell", json!({ "command": command, "workdir": "l/.." }))
    };
    let env = TestEnv::new(Wire::Chat, script(vec![in_link("git status")]));
    let work = env.work_path();
    std::os::unix::fs::symlink(evil_path.join("sub"), work.join("l")).unwrap();
    let output = env.kestrel(&["exec", "--mode", "read-only", "look"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && results[0].0.contains("core.fsmonitor"), "{results:?}");
    assert!(!marker.exists(), "git ran the fsmonitor hook of the repository behind the link");

    // A rule for the workspace's notes.txt does not cover the one `l/..` lands in.
    let env = TestEnv::new(Wire::Chat, script(vec![in_link("echo hi > notes.txt")]));
    let work = env.work_path();
    std::os::unix::fs::symlink(evil_path.join("sub"), work.join("l")).unwrap();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let notes = work.join("notes.txt");
    env.write_config(&format!(
        "{config}\n[permissions]\nallow_write = [\"{}\"]\n",
        notes.display()
    ));
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && results[0].0.contains("needs approval"), "{results:?}");
    assert!(!evil_path.join("notes.txt").exists(), "it wrote behind the link");
}

#[cfg(unix)]
#[test]
fn an_allowed_directory_does_not_let_a_symlink_in_it_write_git_config() {
    let env = TestEnv::new(
        Wire::Chat,
        script(vec![
            ScriptedToolCall::new(
                "write_file",
                json!({"path": "docs/settings.ini", "content": "[core]\n\tfsmonitor = ./x\n"}),
            ),
            ScriptedToolCall::new("write_file", json!({"path": "docs/a.md", "content": "a"})),
        ]),
    );
    let work = env.work_path();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir(work.join("docs")).unwrap();
    std::os::unix::fs::symlink("../.git/config", work.join("docs/settings.ini")).unwrap();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    let docs = work.join("docs");
    env.write_config(&format!("{config}\n[permissions]\nallow_write = [\"{}\"]\n", docs.display()));
    let output = env.kestrel(&["exec", "--mode", "ask", "go"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(results[0].1 && results[0].0.contains("git metadata"), "{results:?}");
    assert_eq!(std::fs::read_to_string(work.join(".git/config")).unwrap(), "[core]\n");
    assert!(!results[1].1 && work.join("docs/a.md").exists(), "{results:?}");
}

#[test]
fn read_only_git_status_refuses_an_index_only_submodule_whose_config_runs_a_program() {
    let env = TestEnv::new(Wire::Chat, script(vec![shell("git status")]));
    let work = env.work_path();
    let git = |dir: &std::path::Path, args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        assert!(status.unwrap().success(), "git {args:?}");
    };
    git(&work, &["init", "-q"]);
    let sub = work.join("sub");
    std::fs::create_dir(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    std::fs::write(sub.join("f"), "x").unwrap();
    git(&sub, &["add", "f"]);
    git(&sub, &["commit", "-qm", "x"]);
    // A gitlink in the index, no .gitmodules: git status still looks into it.
    git(&work, &["add", "sub"]);
    let marker = work.join("hook-ran");
    let hook = work.join("hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display())).unwrap();
    std::process::Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    git(&sub, &["config", "core.fsmonitor", &hook.display().to_string()]);
    let output = env.kestrel(&["exec", "--mode", "read-only", "look"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let results = tool_results(&env);
    assert!(
        matches!(&results[..], [(output, true)] if output.contains("core.fsmonitor")),
        "{results:?}"
    );
    assert!(!marker.exists(), "the submodule's fsmonitor hook ran in read-only mode");
}

#[test]
fn read_only_git_status_with_a_fifo_gitmodules_is_refused_without_hanging() {
    let env = TestEnv::new(Wire::Chat, script(vec![shell("git status")]));
    let work = env.work_path();
    let status = std::process::Command::new("git").args(["init", "-q"]).current_dir(&work).status();
    assert!(status.unwrap().success());
    let status = std::process::Command::new("mkfifo").arg(work.join(".gitmodules")).status();
    assert!(status.unwrap().success());
    let mut child = env
        .command(&["exec", "--mode", "read-only", "look"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("kestrel hung on a FIFO .gitmodules");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success());
    let results = tool_results(&env);
    assert!(
        matches!(&results[..], [(output, true)] if output.contains(".gitmodules")),
        "{results:?}"
    );
}

/// The TUI's `/status` names the sandbox commands run in: each backend the machine has
/// (forced with KESTREL_SANDBOX), as the sandbox describes itself, with the network.
#[test]
fn status_names_the_sandbox_backend_in_use() {
    for (choice, backend) in [("landlock", "Landlock (ABI "), ("bwrap", "bubblewrap (")] {
        let mut test = tui_support::TuiTest::new(kestrel_testkit::Script::new([]));
        let mut command = test.command(&[]);
        command.env("KESTREL_SANDBOX", choice);
        test.start_command(&command, tui_support::ROWS, tui_support::COLS);
        test.wait("● daemon ready");
        test.type_text("/status");
        test.press(kestrel_testkit::Key::Enter);
        let screen = test.wait("Status");
        let line = screen
            .lines()
            .find(|line| line.starts_with("sandbox"))
            .unwrap_or_else(|| panic!("{choice}: no sandbox line: {screen}"));
        assert!(line.contains(backend), "{choice}: {line}");
        assert!(line.contains("network off"), "{choice}: {line}");
    }
}
