//! The shell tool runs commands in the user's login environment without running the
//! login profile for each one: a PATH entry, a variable, a function and an alias set only
//! in `~/.bash_profile` reach commands, the profile's own output does not reach the
//! model, the profile runs once per session, and again after it changed. Through
//! `kestrel exec` in auto (sandboxed) and yolo, with a temp HOME.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{TestEnv, Wire, stderr};
use kestrel_testkit::{Script, Step};
use serde_json::json;
use std::path::Path;

/// A login profile that changes what commands see, counts its runs in `$HOME/runs`, and
/// prints noise on both stdout and stderr (as pyenv's `cannot rehash` does).
const PROFILE: &str = r#"echo ran >> "$HOME/runs"
export PATH="$HOME/profile-bin:$PATH"
export KESTREL_PROFILE_VALUE=from-profile-1
export KESTREL_PROFILE_TOKEN=tok-should-not-leak
greet() { echo "hello from $1"; }
shopt -s expand_aliases
alias kq='echo alias-ran'
echo "profile-stdout-noise"
echo "pyenv: cannot rehash: profile-stderr-noise" >&2
"#;

fn login_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".bash_profile"), PROFILE).unwrap();
    let bin = home.path().join("profile-bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("kq-tool");
    std::fs::write(&tool, "#!/bin/sh\necho tool-on-path\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    home
}

fn shell_calls(commands: &[&str]) -> Script {
    let mut steps: Vec<Step> = commands
        .iter()
        .map(|command| Step::tool_call("shell", json!({ "command": command })))
        .collect();
    steps.push(Step::text("done"));
    Script::new(steps)
}

/// `kestrel exec --mode MODE` running `commands` with `home` as HOME; the shell results,
/// in order: (output, is_error).
fn exec_in_home(home: &Path, mode: &str, commands: &[&str]) -> Vec<(String, bool)> {
    let env = TestEnv::new(Wire::Chat, shell_calls(commands));
    let output = env
        .command(&["exec", "--mode", mode, "run the commands"])
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(output.status.success(), "{mode}: {}", stderr(&output));
    let results = env.tool_results();
    assert_eq!(results.len(), commands.len(), "{mode}: {results:?}");
    results
}

fn profile_runs(home: &Path) -> usize {
    std::fs::read_to_string(home.join("runs")).unwrap_or_default().lines().count()
}

#[test]
fn login_profile_path_functions_and_aliases_reach_commands_without_its_noise() {
    for mode in ["auto", "yolo"] {
        let home = login_home();
        let command = "kq-tool; greet world; kq; echo value=$KESTREL_PROFILE_VALUE; \
                       echo token=${KESTREL_PROFILE_TOKEN:-unset}";
        let results = exec_in_home(home.path(), mode, &[command, command, command]);
        for (text, is_error) in &results {
            assert!(!is_error, "{mode}: {text}");
            for expected in [
                "tool-on-path",
                "hello from world",
                "alias-ran",
                "value=from-profile-1",
                "token=unset",
            ] {
                assert!(text.contains(expected), "{mode}: {expected:?} missing from {text}");
            }
            assert!(
                !text.contains("noise"),
                "{mode}: the profile's output reached the model: {text}"
            );
        }
        assert_eq!(profile_runs(home.path()), 1, "{mode}: the profile ran once for three commands");
    }
}

#[test]
fn a_changed_profile_is_read_again() {
    let home = login_home();
    let profile = home.path().join(".bash_profile");
    let change =
        format!("sed -i s/from-profile-1/from-profile-2/ {} && echo changed", profile.display());
    let show = "echo value=$KESTREL_PROFILE_VALUE";
    let results = exec_in_home(home.path(), "yolo", &[show, &change, show]);
    assert!(results[0].0.contains("value=from-profile-1"), "{results:?}");
    assert!(results[1].0.contains("changed"), "{results:?}");
    assert!(results[2].0.contains("value=from-profile-2"), "the new profile: {results:?}");
    assert_eq!(profile_runs(home.path()), 2, "once before the change and once after");
}

#[test]
fn a_profile_that_fails_leaves_commands_running_in_a_login_shell() {
    let home = tempfile::tempdir().unwrap();
    // The capture never gets to run: commands fall back to `bash -lc`, which still
    // runs the profile up to its exit for each one.
    std::fs::write(
        home.path().join(".bash_profile"),
        "echo ran >> \"$HOME/runs\"\nexport KESTREL_PROFILE_VALUE=early\nexit 3\n",
    )
    .unwrap();
    let results = exec_in_home(home.path(), "yolo", &["echo value=$KESTREL_PROFILE_VALUE"; 2]);
    // `exit` in the profile ends the login shell before the command: as before.
    for (text, _) in &results {
        assert!(text.contains("Exit code: 3"), "{results:?}");
    }
}

#[test]
fn a_failed_snapshot_is_taken_again_by_the_next_call() {
    let home = tempfile::tempdir().unwrap();
    // The first run fails (as a timeout on a loaded machine would); every later one works.
    std::fs::write(
        home.path().join(".bash_profile"),
        "echo ran >> \"$HOME/runs\"\nif [ ! -e \"$HOME/failed-once\" ]; then \
         touch \"$HOME/failed-once\"; exit 3; fi\nexport KESTREL_PROFILE_VALUE=later\n",
    )
    .unwrap();
    let results = exec_in_home(home.path(), "yolo", &["echo value=$KESTREL_PROFILE_VALUE"; 3]);
    for (text, is_error) in &results {
        assert!(!is_error && text.contains("value=later"), "{results:?}");
    }
    // The failed capture, the first call's `bash -lc`, then one snapshot for the other
    // two: a kept failure would have run `bash -lc` for each (four runs).
    assert_eq!(profile_runs(home.path()), 3, "{results:?}");
}

#[test]
fn a_relative_path_entry_does_not_make_a_repository_file_the_shell() {
    for mode in ["auto", "yolo"] {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(".bash_profile"), "export PATH=\".:$PATH\"\n").unwrap();
        let env = TestEnv::new(Wire::Chat, shell_calls(&["echo real-bash=$BASH_VERSION"]));
        let fake = env.work_path().join("bash");
        std::fs::write(&fake, "#!/bin/sh\necho fake-bash-ran\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let output = env
            .command(&["exec", "--mode", mode, "run the commands"])
            .env("HOME", home.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{mode}: {}", stderr(&output));
        let results = env.tool_results();
        assert_eq!(results.len(), 1, "{mode}: {results:?}");
        let (text, is_error) = &results[0];
        assert!(!is_error, "{mode}: {text}");
        assert!(!text.contains("fake-bash-ran"), "{mode}: the workspace's bash ran: {text}");
        assert!(text.contains("real-bash=5") || text.contains("real-bash=4"), "{mode}: {text}");
    }
}

#[test]
fn functions_that_need_extglob_keep_the_rest_of_the_profile() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".bash_profile"),
        "shopt -s extglob\npick() { case $1 in @(a|b)) echo picked-$1;; *) echo other;; esac; }\n\
         zlater() { echo later-function; }\nshopt -s expand_aliases\nalias kq='echo alias-ran'\n\
         umask 0027\n",
    )
    .unwrap();
    for mode in ["auto", "yolo"] {
        let results = exec_in_home(home.path(), mode, &["pick a; pick c; zlater; kq; umask"]);
        let (text, is_error) = &results[0];
        assert!(!is_error, "{mode}: {text}");
        for expected in ["picked-a", "other", "later-function", "alias-ran", "0027"] {
            assert!(text.contains(expected), "{mode}: {expected:?} missing from {text}");
        }
        assert!(!text.contains("syntax error"), "{mode}: {text}");
    }
}
