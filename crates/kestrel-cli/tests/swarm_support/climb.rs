//! The climb tests' toy repository (a metric that sums three files, a check), the planner
//! scripts that propose experiments on it, and the arguments and helpers those tests share.

use super::{PLANNER, SwarmTest, git, implement, of_type};
use kestrel_testkit::Step;
use serde_json::{Value, json};
use std::path::Path;

/// The number to lower: the sum of a.txt, b.txt and c.txt (100 at the start). It talks
/// first: the number is its last line.
pub const METRIC: &str = "sh metric.sh";
pub const CHECK: &str = "sh check.sh";

pub fn files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("metric.sh", "echo measuring\necho $(( $(cat a.txt) + $(cat b.txt) + $(cat c.txt) ))\n"),
        ("check.sh", "test \"$(cat ok.txt)\" = ok\n"),
        ("a.txt", "50\n"),
        ("b.txt", "30\n"),
        ("c.txt", "20\n"),
        ("ok.txt", "ok\n"),
        ("notes.txt", "notes\n"),
    ]
}

pub fn experiment(id: &str, hypothesis: &str) -> Value {
    json!({"id": id, "hypothesis": hypothesis, "description": format!("Do {id}.")})
}

/// `files()` with metric.sh replaced by `metric`.
pub fn with_metric(metric: &'static str) -> Vec<(&'static str, &'static str)> {
    let mut files = files();
    files[0] = ("metric.sh", metric);
    files
}

/// The planner's turn: it proposes `experiments`.
pub fn propose(experiments: &[Value]) -> Vec<Step> {
    let route = "task=plan role=planner";
    vec![
        Step::tool_call("swarm_experiments", json!({"experiments": experiments}))
            .when(Some(PLANNER), Some(route)),
        Step::text("proposed").when(Some(PLANNER), Some(route)),
    ]
}

/// The planner proposes the four; each implementer writes its one file.
pub fn script() -> Vec<Step> {
    let mut steps = propose(&[
        experiment("faster", "a.txt costs less when it holds 30"),
        experiment("slower", "b.txt at 50 looks simpler"),
        experiment("broken", "ok.txt is not needed"),
        experiment("same", "the notes slow nothing down"),
    ]);
    steps.extend(implement("faster", &[("a.txt", "30\n")]));
    steps.extend(implement("slower", &[("b.txt", "50\n")]));
    steps.extend(implement("broken", &[("ok.txt", "gone\n")]));
    steps.extend(implement("same", &[("notes.txt", "more notes\n")]));
    steps
}

pub fn climb_args() -> Vec<&'static str> {
    vec![
        "climb",
        "--metric",
        METRIC,
        "--direction",
        "lower",
        "--check",
        CHECK,
        "--experiments",
        "4",
        "--runs",
        "2",
        "--yes",
    ]
}

pub fn decisions(events: &[Value]) -> Vec<(String, String)> {
    let mut decided: Vec<(String, String)> = of_type(events, "experiment_decided")
        .iter()
        .map(|e| (e["task"].as_str().unwrap().to_string(), e["decision"].as_str().unwrap().into()))
        .collect();
    decided.sort();
    decided
}

pub fn expected() -> Vec<(String, String)> {
    [("broken", "check_failed"), ("faster", "kept"), ("same", "neutral"), ("slower", "worse")]
        .iter()
        .map(|(id, decision)| (id.to_string(), decision.to_string()))
        .collect()
}

/// Only `faster` is on the integration branch, merged once with its trailer; the
/// user's branch is untouched.
pub fn assert_only_the_improvement_merged(test: &SwarmTest, run: &str) {
    let branch = format!("kestrel/{run}");
    let show = |file: &str| git(test.repo.path(), &["show", &format!("{branch}:{file}")]);
    assert_eq!(show("a.txt"), "30\n");
    assert_eq!(show("b.txt"), "30\n");
    assert_eq!(show("ok.txt"), "ok\n");
    assert_eq!(show("notes.txt"), "notes\n");
    let trailers = git(
        test.repo.path(),
        &[
            "log",
            "--merges",
            "--first-parent",
            "--format=%(trailers:key=Kestrel-Swarm,valueonly)",
            &format!("main..{branch}"),
        ],
    );
    let merged: Vec<&str> = trailers.lines().filter(|line| !line.trim().is_empty()).collect();
    assert_eq!(merged, [format!("{run}/faster/1")], "{trailers}");
    assert_eq!(git(test.repo.path(), &["show", "main:a.txt"]), "50\n");
}

pub fn run_dir(test: &SwarmTest, run: &str) -> std::path::PathBuf {
    test.home.path().join("swarm").join(run)
}

/// A planner proposing only `id`, which lowers the sum to 80 (a.txt 50 → 30).
pub fn one_experiment(id: &str) -> Vec<Step> {
    let mut steps = propose(&[experiment(id, "a.txt costs less when it holds 30")]);
    steps.extend(implement(id, &[("a.txt", "30\n")]));
    steps
}

pub fn one_args() -> Vec<&'static str> {
    let mut args = climb_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "1";
    args
}

/// `kestrel swarm ARGS` in the background with `env` set.
pub fn spawn_with(test: &SwarmTest, args: &[&str], env: &[(&str, &Path)]) -> super::Background {
    let mut command = test.command(&[&["swarm"], args].concat());
    for (name, value) in env {
        command.env(name, value);
    }
    test.spawn(command)
}

/// `kestrel swarm ARGS` with `env` and the failpoint `at`, which aborts it: the run's id.
pub fn abort_at(test: &SwarmTest, args: &[&str], at: &str, env: &[(&str, &Path)]) -> String {
    let mut command = test.command(&[&["swarm"], args].concat());
    command.env("KESTREL_SWARM_FAILPOINT", at);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = test.output_within(command);
    assert_ne!(output.status.code(), Some(0), "the failpoint aborts: {}", super::stderr(&output));
    test.run_id()
}

pub fn two_args() -> Vec<&'static str> {
    let mut args = climb_args();
    let at = args.iter().position(|arg| *arg == "--experiments").unwrap();
    args[at + 1] = "2";
    let check = args.iter().position(|arg| *arg == "--check").unwrap();
    args.drain(check..check + 2);
    args
}

/// config.toml with the scripted provider, `[providers.keyless]` (its key variable never
/// set) and `roles` for the swarm's roles.
pub fn config_with_roles(test: &SwarmTest, roles: &str) {
    let config = format!(
        "model = \"scripted/{}\"\n\n[providers.scripted]\nbase_url = \"{url}\"\nwire_api = \"chat\"\n\
         api_key_env = \"{}\"\nrequest_max_retries = 1\n\n[providers.keyless]\nbase_url = \"{url}\"\n\
         wire_api = \"chat\"\napi_key_env = \"KESTREL_TEST_NEVER_SET_KEY\"\n\n[swarm]\n\
         workdir = \"{}\"\n{roles}",
        super::IMPLEMENTER,
        super::KEY_VAR,
        test.workdir.path().display(),
        url = test.server.base_url(),
    );
    std::fs::write(test.home.path().join("config.toml"), config).unwrap();
}
