//! Swarm tests' harness: a toy git repository as the user's checkout, a temp home whose
//! config gives each role a model of the scripted provider (`scripted/impl`,
//! `scripted/review`, `scripted/plan`), a scripted model that answers by model and by
//! the role's prompt line, and the real `kestrel swarm`. The daemon the runs start is
//! stopped when the test ends. Every wait is bounded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

pub mod climb;
pub mod ray;

use kestrel_testkit::{Script, ScriptedServer, ScriptedToolCall, ServerOptions, Step};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const KEY_VAR: &str = "KESTREL_TEST_SCRIPTED_KEY";
pub const IMPLEMENTER: &str = "impl";
pub const REVIEWER: &str = "review";
pub const PLANNER: &str = "plan";

/// The bound on any wait in these tests, unscaled (see [`wait`]).
pub const WAIT: Duration = Duration::from_secs(120);

/// The bound on any wait: [`WAIT`] times `KESTREL_TEST_WAIT_SCALE` when set (a number, for
/// a loaded machine).
pub fn wait() -> Duration {
    let scale = std::env::var("KESTREL_TEST_WAIT_SCALE").ok().and_then(|s| s.parse::<f64>().ok());
    match scale {
        Some(scale) if scale.is_finite() && scale > 0.0 => WAIT.mul_f64(scale),
        _ => WAIT,
    }
}

pub struct SwarmTest {
    pub home: tempfile::TempDir,
    /// The user's checkout (a git repository on `main`).
    pub repo: tempfile::TempDir,
    /// `[swarm] workdir`.
    pub workdir: tempfile::TempDir,
    pub server: ScriptedServer,
}

impl SwarmTest {
    /// A repository holding `files` (committed on `main`) and a scripted model playing
    /// `steps`; `extra_config` is appended to config.toml.
    pub fn new(files: &[(&str, &str)], steps: Vec<Step>, extra_config: &str) -> SwarmTest {
        let home = tempfile::tempdir().unwrap();
        let log = home.path().join("requests.jsonl");
        let options = ServerOptions { request_log: Some(log), ..ServerOptions::default() };
        let server = ScriptedServer::start_with(Script::new(steps), options).unwrap();
        let test = SwarmTest {
            home,
            repo: tempfile::tempdir().unwrap(),
            workdir: tempfile::tempdir().unwrap(),
            server,
        };
        test.write_config(extra_config);
        git(test.repo.path(), &["init", "-q", "-b", "main"]);
        git(test.repo.path(), &["config", "user.email", "user@example.org"]);
        git(test.repo.path(), &["config", "user.name", "User"]);
        for (path, content) in files {
            let file = test.repo.path().join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, content).unwrap();
        }
        git(test.repo.path(), &["add", "-A"]);
        git(test.repo.path(), &["commit", "-q", "-m", "start"]);
        test
    }

    pub fn write_config(&self, extra: &str) {
        let config = format!(
            "model = \"scripted/{IMPLEMENTER}\"\n\n[providers.scripted]\nbase_url = \"{}\"\n\
             wire_api = \"chat\"\napi_key_env = \"{KEY_VAR}\"\nrequest_max_retries = 1\n\n\
             [swarm]\nworkdir = \"{}\"\n\n[swarm.roles.implementer]\nmodel = \"scripted/{IMPLEMENTER}\"\n\n\
             [swarm.roles.reviewer]\nmodel = \"scripted/{REVIEWER}\"\n\n[swarm.roles.planner]\n\
             model = \"scripted/{PLANNER}\"\n{extra}",
            self.server.base_url(),
            self.workdir.path().display()
        );
        std::fs::write(self.home.path().join("config.toml"), config).unwrap();
    }

    pub fn home(&self) -> kestrel_store::KestrelHome {
        kestrel_store::KestrelHome::at(self.home.path())
    }

    /// `kestrel ARGS` in the repository.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kestrel"));
        command
            .args(args)
            .current_dir(self.repo.path())
            .env("KESTREL_HOME", self.home.path())
            .env("KESTREL_CATALOG_URL", "off")
            .env("KESTREL_DAEMON_IDLE_SECS", "300")
            .env(KEY_VAR, "sk-test")
            .env_remove("KESTREL_MODEL")
            .env_remove("KESTREL_MODE")
            .env_remove("XDG_CACHE_HOME")
            .stdin(Stdio::null());
        command
    }

    pub fn swarm(&self, args: &[&str]) -> Output {
        let mut full = vec!["swarm"];
        full.extend_from_slice(args);
        self.command(&full).output().unwrap()
    }

    /// The graph file written into the home (outside the repository).
    pub fn graph(&self, text: &str) -> String {
        let path = self.home.path().join("graph.toml");
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    /// The only run's id.
    pub fn run_id(&self) -> String {
        let runs = std::fs::read_dir(self.home.path().join("swarm")).unwrap();
        let ids: Vec<String> =
            runs.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(ids.len(), 1, "one run expected: {ids:?}");
        ids[0].clone()
    }

    /// The run's events, as JSON.
    pub fn events(&self, run: &str) -> Vec<Value> {
        let path = self.home.path().join("swarm").join(run).join("events.jsonl");
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.ends_with('}'))
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Waits (bounded) until the run's events hold one matching `check`.
    pub fn wait_for_event(&self, what: &str, check: impl Fn(&Value) -> bool) {
        let start = Instant::now();
        while start.elapsed() < wait() {
            let runs = self.home.path().join("swarm");
            if let Ok(entries) = std::fs::read_dir(&runs) {
                for entry in entries.flatten() {
                    let run = entry.file_name().to_string_lossy().into_owned();
                    if self.events(&run).iter().any(&check) {
                        return;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("timed out waiting for {what}");
    }

    pub fn print_logs(&self) {
        let logs = self.home.path().join("logs");
        let Ok(entries) = std::fs::read_dir(&logs) else { return };
        for entry in entries.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            eprintln!("--- {} (last lines)", entry.path().display());
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }

    fn daemon_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.home.path().join("run/daemon.pid")).ok()?;
        text.trim().parse().ok()
    }
}

impl Drop for SwarmTest {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_logs();
        }
        let pid = self.daemon_pid();
        let _ = self.command(&["daemon", "stop"]).output();
        if let Some(pid) = pid {
            // SAFETY: kill(2) only sends a signal, to the daemon this test started.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

/// `git ARGS` in `dir`; panics on failure; stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The prompt-line part that routes a step to one role of one task.
fn route(task: &str, role: &str) -> String {
    format!("task={task} role={role}")
}

/// An implementer turn of `task`: writes `files`, then says it is done.
pub fn implement(task: &str, files: &[(&str, &str)]) -> Vec<Step> {
    let calls = files
        .iter()
        .map(|(path, content)| {
            ScriptedToolCall::new("write_file", json!({"path": path, "content": content}))
        })
        .collect();
    let when = route(task, "implementer");
    vec![
        Step::tool_calls(calls).when(Some(IMPLEMENTER), Some(&when)),
        Step::text("done").when(Some(IMPLEMENTER), Some(&when)),
    ]
}

/// A reviewer turn of `task`'s attempt: a verdict, then a closing word.
pub fn review(task: &str, attempt: u32, approve: bool, findings: &[&str]) -> Vec<Step> {
    let when = format!("{} attempt={attempt}", route(task, "reviewer"));
    vec![
        Step::tool_call("swarm_review", json!({"approve": approve, "findings": findings}))
            .when(Some(REVIEWER), Some(&when)),
        Step::text("reviewed").when(Some(REVIEWER), Some(&when)),
    ]
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Where the run's worktrees live.
pub fn run_workdir(test: &SwarmTest, run: &str) -> PathBuf {
    test.workdir.path().join(run)
}

// Helpers for the input and control tests (swarm_input.rs, swarm_control.rs): configs
// with other settings, every run and branch, `kestrel swarm` in the background with its
// output in files, `status --json`, and slow or approval-seeking implementer turns.

/// What a test changes in config.toml; the rest is as [`SwarmTest::write_config`] has it.
#[derive(Debug, Clone, Default)]
pub struct ConfigParts<'a> {
    /// Top-level keys, before any table (e.g. `catalog_url = "…"`).
    pub top: &'a str,
    /// Keys of `[swarm]` (e.g. `verify_timeout_s = 2`).
    pub swarm: &'a str,
    /// The reviewer's model, `provider/model`; `None`: `scripted/`[`REVIEWER`].
    pub reviewer: Option<&'a str>,
    /// Keys of `[swarm.roles.reviewer]` besides `model` (e.g. `allow_same_model = true`).
    pub reviewer_keys: &'a str,
    /// Keys of `[providers.scripted]` besides the usual ones.
    pub provider_keys: &'a str,
    /// Tables of their own, appended (e.g. another provider).
    pub extra: &'a str,
}

impl SwarmTest {
    /// Rewrites config.toml with `parts`.
    pub fn write_config_parts(&self, parts: &ConfigParts<'_>) {
        let config = format!(
            "model = \"scripted/{IMPLEMENTER}\"\n{top}\n\n[providers.scripted]\nbase_url = \"{url}\"\n\
             wire_api = \"chat\"\napi_key_env = \"{KEY_VAR}\"\nrequest_max_retries = 1\n{provider}\n\n\
             [swarm]\nworkdir = \"{workdir}\"\n{swarm}\n\n[swarm.roles.implementer]\n\
             model = \"scripted/{IMPLEMENTER}\"\n\n[swarm.roles.reviewer]\nmodel = \"{reviewer}\"\n\
             {reviewer_keys}\n\n[swarm.roles.planner]\nmodel = \"scripted/{PLANNER}\"\n\n{extra}\n",
            top = parts.top,
            url = self.server.base_url(),
            provider = parts.provider_keys,
            workdir = self.workdir.path().display(),
            swarm = parts.swarm,
            reviewer = parts.reviewer.map_or(format!("scripted/{REVIEWER}"), str::to_string),
            reviewer_keys = parts.reviewer_keys,
            extra = parts.extra,
        );
        std::fs::write(self.home.path().join("config.toml"), config).unwrap();
    }

    /// Every run's id (none before the first run).
    pub fn run_ids(&self) -> Vec<String> {
        let Ok(runs) = std::fs::read_dir(self.home.path().join("swarm")) else {
            return Vec::new();
        };
        let mut ids: Vec<String> =
            runs.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect();
        ids.sort();
        ids
    }

    /// The repository's branches.
    pub fn branches(&self) -> Vec<String> {
        let text =
            git(self.repo.path(), &["for-each-ref", "--format=%(refname:short)", "refs/heads"]);
        text.lines().map(str::to_string).collect()
    }

    /// `kestrel swarm ARGS` in the background, its output going to files.
    pub fn spawn_swarm(&self, args: &[&str]) -> Background {
        let mut full = vec!["swarm"];
        full.extend_from_slice(args);
        self.spawn(self.command(&full))
    }

    /// `command` (one of [`SwarmTest::command`]) in the background, its output going to
    /// files in the home.
    pub fn spawn(&self, mut command: Command) -> Background {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let number = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = self.home.path().join(format!("background-{number}.out"));
        let err = self.home.path().join(format!("background-{number}.err"));
        let child = command
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Background { child: Some(child), out, err }
    }

    /// `kestrel swarm ARGS` to its end, waiting at most [`wait`] (it is killed then).
    pub fn swarm_within(&self, args: &[&str]) -> Output {
        self.spawn_swarm(args).wait()
    }

    /// `command` to its end, waiting at most [`wait`] (it is killed then).
    pub fn output_within(&self, command: Command) -> Output {
        self.spawn(command).wait()
    }

    /// `kestrel swarm status RUN --json`, parsed.
    pub fn status_json(&self, run: &str) -> Value {
        let output = self.swarm_within(&["status", run, "--json"]);
        assert_eq!(output.status.code(), Some(0), "status: {}", stderr(&output));
        serde_json::from_str(stdout(&output).trim()).unwrap()
    }

    /// Waits (bounded) until `status --json` of the run matches `check`; returns it.
    pub fn wait_for_status(&self, run: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let status = self.status_json(run);
            if check(&status) {
                return status;
            }
            assert!(start.elapsed() < wait(), "timed out waiting for {what}: {status:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The bodies of the model requests so far, in order.
    pub fn model_requests(&self) -> Vec<Value> {
        self.server.requests().into_iter().map(|request| request.body).collect()
    }

    /// The bodies of the model requests for `model` (an id of the scripted provider).
    pub fn requests_for(&self, model: &str) -> Vec<Value> {
        self.model_requests().into_iter().filter(|body| body["model"] == model).collect()
    }
}

/// A `kestrel swarm` started in the background; killed if the test ends first.
pub struct Background {
    child: Option<std::process::Child>,
    out: PathBuf,
    err: PathBuf,
}

impl Background {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends SIGINT (Ctrl+C) to this process only.
    pub fn interrupt(&self) {
        // SAFETY: kill(2) only sends a signal, to the child this test started.
        unsafe {
            libc::kill(self.pid() as libc::pid_t, libc::SIGINT);
        }
    }

    /// Its stderr so far.
    pub fn stderr_now(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits (bounded) for it to exit: its status and output.
    pub fn wait(mut self) -> Output {
        let mut child = self.child.take().unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > wait() {
                let _ = child.kill();
                let _ = child.wait();
                panic!("kestrel swarm did not exit in {:?}: {}", wait(), self.stderr_now());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Output {
            status,
            stdout: std::fs::read(&self.out).unwrap_or_default(),
            stderr: std::fs::read(&self.err).unwrap_or_default(),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// [`implement`], its first response streamed with `delay_ms` between events: the turn
/// stays in flight for a while (to look at or cancel).
pub fn implement_slowly(task: &str, files: &[(&str, &str)], delay_ms: u64) -> Vec<Step> {
    let mut steps = implement(task, files);
    steps[0] = steps[0].clone().with_fault(kestrel_testkit::Fault::SlowChunks { delay_ms });
    steps
}

/// A planner turn: `swarm_plan` with `tasks`, then a closing word.
pub fn plan_turn(tasks: Value) -> Vec<Step> {
    vec![
        Step::tool_call("swarm_plan", json!({"tasks": tasks})).when(Some(PLANNER), None),
        Step::text("planned").when(Some(PLANNER), None),
    ]
}

/// The events of `kind`.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|event| event["type"] == kind).collect()
}

impl SwarmTest {
    /// How the last turn of `session` ended, waiting (bounded) until its record says.
    pub fn wait_for_turn_end(&self, session: &str) -> kestrel_protocol::StopReason {
        let start = Instant::now();
        loop {
            let ended = kestrel_store::SessionIndex::find(&self.home(), session)
                .and_then(|summary| kestrel_store::read_record(&summary.path))
                .ok()
                .and_then(|replay| {
                    let last = replay.entries.iter().rev().find(|entry| {
                        matches!(
                            entry.item,
                            kestrel_protocol::RecordItem::TurnStarted {}
                                | kestrel_protocol::RecordItem::TurnCompleted { .. }
                        )
                    })?;
                    match &last.item {
                        kestrel_protocol::RecordItem::TurnCompleted { stop_reason, .. } => {
                            Some(*stop_reason)
                        }
                        _ => None,
                    }
                });
            if let Some(reason) = ended {
                return reason;
            }
            assert!(start.elapsed() < wait(), "the turn of session {session} never ended");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
