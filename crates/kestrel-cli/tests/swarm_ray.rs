//! The swarm's `ray` executor on a real Ray head (`.ci/run` starts one; see
//! swarm_support/ray.rs): implementer and reviewer turns and verifications run as Ray
//! jobs of `kestrel swarm node`, with a bare repository as the run's remote and a home
//! of their own (another machine's, as far as they know); the merge stays here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod swarm_support;

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use swarm_support::{
    ConfigParts, SwarmTest, WAIT, git, implement, implement_slowly, of_type, ray, review, stderr,
    stdout,
};

/// One task, `first`, done when first.txt exists.
const ONE_TASK: &str =
    "[[task]]\nid = \"first\"\ntitle = \"First file\"\nacceptance = [\"test -f first.txt\"]\n";

const TWO_TASKS: &str = r#"
[[task]]
id = "first"
title = "First file"
acceptance = ["test -f first.txt"]

[[task]]
id = "second"
title = "Second file"
depends_on = ["first"]
acceptance = ["test -f first.txt", "grep -qx two second.txt"]
"#;

/// A cluster's view of the test: the bare remote, the nodes' home (config pointing at
/// the scripted model), the key file nodes read, and `[swarm.ray]` naming them.
struct Cluster {
    remote: tempfile::TempDir,
    node_home: tempfile::TempDir,
    node_tmp: tempfile::TempDir,
}

impl Cluster {
    fn new(test: &SwarmTest, address: &str) -> Cluster {
        Cluster::with(test, address, "executor = \"ray\"", "job_timeout_s = 300\nmemory_mb = 64\n")
    }

    /// With `swarm` as the `[swarm]` keys and `ray` added to `[swarm.ray]`.
    fn with(test: &SwarmTest, address: &str, swarm: &str, ray: &str) -> Cluster {
        let cluster = Cluster {
            remote: tempfile::tempdir().unwrap(),
            node_home: tempfile::tempdir().unwrap(),
            node_tmp: tempfile::tempdir().unwrap(),
        };
        git(cluster.remote.path(), &["init", "-q", "--bare"]);
        git(test.repo.path(), &["push", "-q", &cluster.remote_url(), "main"]);
        let keys = cluster.node_home.path().join("keys.env");
        std::fs::write(&keys, format!("{}=sk-test\n", swarm_support::KEY_VAR)).unwrap();
        let ray = format!(
            "[swarm.ray]\naddress = \"{address}\"\nremote = \"{remote}\"\nkestrel = \"{kestrel}\"\n\
             env_file = \"{keys}\"\n{ray}\
             env = {{ KESTREL_HOME = \"{home}\", TMPDIR = \"{tmp}\", KESTREL_CATALOG_URL = \"off\", PYENV_REHASH_TIMEOUT = \"1\" }}\n",
            remote = cluster.remote_url(),
            kestrel = env!("CARGO_BIN_EXE_kestrel"),
            keys = keys.display(),
            home = cluster.node_home.path().display(),
            tmp = cluster.node_tmp().display(),
        );
        test.write_config_parts(&ConfigParts { swarm, extra: &ray, ..ConfigParts::default() });
        // The nodes' own config: the same providers, no key in it.
        let config = std::fs::read_to_string(test.home.path().join("config.toml")).unwrap();
        std::fs::write(cluster.node_home.path().join("config.toml"), config).unwrap();
        cluster
    }

    /// The nodes' temp dir (`TMPDIR`), where jobs clone (outside their home: a workspace
    /// inside `$KESTREL_HOME` is read-only to commands).
    fn node_tmp(&self) -> std::path::PathBuf {
        self.node_tmp.path().to_path_buf()
    }

    /// The clones jobs left in the nodes' temp dir.
    fn clones_left(&self) -> Vec<String> {
        std::fs::read_dir(self.node_tmp())
            .unwrap()
            .flatten()
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("kestrel-node-"))
            .collect()
    }

    fn remote_url(&self) -> String {
        self.remote.path().display().to_string()
    }

    fn refs(&self) -> String {
        git(self.remote.path(), &["for-each-ref", "--format=%(refname)"])
    }
}

/// The cluster's jobs of `run`.
fn jobs_of(address: &str, run: &str) -> Vec<Value> {
    let body = http_get(address, "/api/jobs/");
    let jobs: Vec<Value> = serde_json::from_str(&body).unwrap();
    jobs.into_iter()
        .filter(|job| job["submission_id"].as_str().is_some_and(|id| id.contains(run)))
        .collect()
}

/// A GET of the Jobs API through curl (the test does not share the binary's client).
fn http_get(address: &str, path: &str) -> String {
    let output = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", &format!("{address}{path}")])
        .output()
        .unwrap();
    assert!(output.status.success(), "curl {path}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn http_post(address: &str, path: &str) -> String {
    let output = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "-X", "POST", &format!("{address}{path}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_graph_runs_on_ray_jobs_and_ends_as_on_the_local_executor() {
    let Some(address) = ray::address("a_graph_runs_on_ray_jobs_and_ends_as_on_the_local_executor")
    else {
        return;
    };
    let mut steps = implement("first", &[("first.txt", "one\n")]);
    steps.extend(review("first", 1, true, &[]));
    steps.extend(implement("second", &[("second.txt", "two\n")]));
    steps.extend(review("second", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let cluster = Cluster::new(&test, &address);
    let main_before = git(test.repo.path(), &["rev-parse", "main"]);
    let graph = test.graph(TWO_TASKS);

    let output = test.swarm_within(&["run", "--graph", &graph, "--json"]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}\n{}", stdout(&output));
    let run = test.run_id();
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:first.txt")]), "one\n");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:second.txt")]), "two\n");
    let trailers = git(test.repo.path(), &["log", "--merges", "--format=%B", &branch]);
    assert!(trailers.contains(&format!("Kestrel-Swarm: {run}/second/1")), "{trailers}");
    assert_eq!(git(test.repo.path(), &["rev-parse", "main"]), main_before);
    assert!(!test.repo.path().join("first.txt").exists(), "the checkout stays as it was");

    // The same story as on the local executor, event for event.
    let events = test.events(&run);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let one_task = [
        "attempt_started",
        "turn_started",
        "turn_finished",
        "committed",
        "turn_started",
        "turn_finished",
        "reviewed",
        "verified",
        "merged",
    ];
    let mut expected = vec!["run_started"];
    expected.extend(one_task);
    expected.extend(one_task);
    expected.push("run_finished");
    assert_eq!(kinds, expected, "{events:#?}");

    // Each role turn ran in the nodes' home; its record came back here with its cost.
    let home = test.home();
    for started in of_type(&events, "turn_started") {
        let session = started["session"].as_str().unwrap();
        let here = kestrel_store::SessionIndex::find(&home, session).unwrap();
        let node = kestrel_store::KestrelHome::at(cluster.node_home.path());
        let there = kestrel_store::SessionIndex::find(&node, session).unwrap();
        assert_eq!(here.usage, there.usage, "{session}");
        assert!(here.usage.input_tokens > 0, "{session}");
    }
    let finished = of_type(&events, "turn_finished");
    assert!(finished.iter().all(|e| e["input_tokens"].as_u64().unwrap() > 0), "{finished:#?}");
    let refs = cluster.refs();
    for task in ["first", "second"] {
        assert!(refs.contains(&format!("refs/kestrel/records/{run}/{task}")), "{refs}");
        assert!(refs.contains(&format!("refs/heads/kestrel/{run}-{task}")), "{refs}");
    }

    // Four turns and two verifications ran as jobs; no key is in what the cluster keeps.
    let jobs = jobs_of(&address, &run);
    assert_eq!(jobs.len(), 6, "{jobs:#?}");
    assert!(jobs.iter().all(|job| job["status"] == "SUCCEEDED"), "{jobs:#?}");
    for job in &jobs {
        let id = job["submission_id"].as_str().unwrap();
        let logs = http_get(&address, &format!("/api/jobs/{id}/logs"));
        assert!(!job.to_string().contains("sk-test"), "{job}");
        assert!(!logs.contains("sk-test"), "{id}: {logs}");
    }
    let roles: Vec<&str> =
        jobs.iter().map(|job| job["metadata"]["kestrel_role"].as_str().unwrap()).collect();
    assert_eq!(roles.iter().filter(|role| **role == "verifier").count(), 2, "{roles:?}");
    let status = test.status_json(&run);
    assert_eq!(status["state"], "done", "{status:#}");
    assert!(status["cost_usd"].as_f64().is_some(), "{status:#}");
    assert!(status["tasks"][0]["tokens"]["input"].as_u64().unwrap() > 0, "{status:#}");
}

#[test]
fn a_job_stopped_through_the_api_mid_attempt_is_submitted_again_and_the_run_ends_merged() {
    let name = "a_job_stopped_through_the_api_mid_attempt_is_submitted_again";
    let Some(address) = ray::address(name) else { return };
    // The first implementer request streams slowly: the job is stopped during it. The
    // retry starts again from what was pushed (nothing: a stopped node pushes nothing).
    let mut steps = implement_slowly("first", &[("first.txt", "one\n")], 400);
    steps.truncate(1);
    steps.extend(implement("first", &[("first.txt", "one\n")]));
    steps.extend(review("first", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::new(&test, &address);
    let graph = test.graph(ONE_TASK);
    let background = test.spawn_swarm(&["run", "--graph", &graph]);
    let start = Instant::now();
    let run = loop {
        if let Some(run) = test.run_ids().first() {
            break run.clone();
        }
        assert!(start.elapsed() < WAIT, "no run started: {}", background.stderr_now());
        std::thread::sleep(Duration::from_millis(100));
    };
    let first = format!("kestrel-{run}-first-1-implementer-0");
    test.wait_for_event("the implementer's turn started", |event| event["type"] == "turn_started");
    let stopped = http_post(&address, &format!("/api/jobs/{first}/stop"));
    assert!(stopped.contains("true"), "{stopped}");

    let output = background.wait();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let jobs = jobs_of(&address, &run);
    let status_of = |id: &str| {
        jobs.iter().find(|job| job["submission_id"] == id).map(|job| job["status"].clone())
    };
    assert_eq!(status_of(&first), Some(Value::from("STOPPED")), "{jobs:#?}");
    let retry = format!("kestrel-{run}-first-1-implementer-1");
    assert_eq!(status_of(&retry), Some(Value::from("SUCCEEDED")), "{jobs:#?}");
    // Still the first attempt: a lost job does not use one up.
    let events = test.events(&run);
    assert_eq!(of_type(&events, "attempt_started").len(), 1, "{events:#?}");
    assert_eq!(of_type(&events, "turn_finished").len(), 2, "implementer and reviewer: {events:#?}");
    assert_eq!(of_type(&events, "merged").len(), 1, "{events:#?}");
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:first.txt")]), "one\n");
}

#[test]
fn an_orchestrator_killed_mid_job_is_resumed_after_the_job_ended_and_takes_its_pushed_work() {
    let name = "an_orchestrator_killed_mid_job_is_resumed_after_the_job_ended";
    let Some(address) = ray::address(name) else { return };
    let mut steps = implement_slowly("first", &[("first.txt", "one\n")], 300);
    steps.extend(review("first", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::new(&test, &address);
    let graph = test.graph(ONE_TASK);
    let background = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("the implementer's turn started", |event| event["type"] == "turn_started");
    // SAFETY: kill(2) only sends a signal, to the orchestrator this test started.
    unsafe {
        libc::kill(background.pid() as libc::pid_t, libc::SIGKILL);
    }
    let killed = background.wait();
    assert_eq!(killed.status.code(), None, "killed by a signal");
    let run = test.run_id();
    // The job ends while no orchestrator follows it: its commit is only on the remote.
    let job = format!("kestrel-{run}-first-1-implementer-0");
    let start = Instant::now();
    while !http_get(&address, &format!("/api/jobs/{job}")).contains("\"SUCCEEDED\"") {
        assert!(start.elapsed() < WAIT, "the job did not end");
        std::thread::sleep(Duration::from_millis(200));
    }

    let output = test.swarm_within(&["resume", &run]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    // The job the killed orchestrator submitted was read, not submitted again, and its
    // pushed commit is what was merged.
    let jobs = jobs_of(&address, &run);
    let implementer: Vec<&Value> =
        jobs.iter().filter(|job| job["metadata"]["kestrel_role"] == "implementer").collect();
    assert_eq!(implementer.len(), 1, "{jobs:#?}");
    assert_eq!(implementer[0]["status"], "SUCCEEDED", "{jobs:#?}");
    let events = test.events(&run);
    let started = of_type(&events, "turn_started");
    assert_eq!(started.iter().filter(|e| e["role"] == "implementer").count(), 1, "{events:#?}");
    assert_eq!(of_type(&events, "merged").len(), 1, "{events:#?}");
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:first.txt")]), "one\n");
}

/// A lost node cannot be made on one machine's real head: the scripted Jobs API (which
/// runs each entrypoint for real) loses the implementer's node once its session started.
#[test]
fn a_lost_node_is_retried_once_from_the_pushed_state_and_a_second_loss_fails_the_attempt() {
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    let lost = |id: &str| id.ends_with("-first-1-implementer-0");
    jobs.lose_node(
        kestrel_testkit::NodeLoss::of_job_where(lost).once_log_contains("session.started"),
    );
    let mut steps = implement_slowly("first", &[("first.txt", "one\n")], 300);
    steps.truncate(1);
    steps.extend(implement("first", &[("first.txt", "one\n")]));
    steps.extend(review("first", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::new(&test, &jobs.address());
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let run = test.run_id();
    let job =
        |suffix: &str| jobs.job(&format!("kestrel-{run}-first-1-implementer-{suffix}")).unwrap();
    assert!(job("0").node_lost, "{:?}", job("0"));
    assert_eq!(job("1").status, kestrel_testkit::JobStatus::Succeeded, "{:?}", job("1"));
    let events = test.events(&run);
    assert_eq!(of_type(&events, "attempt_started").len(), 1, "{events:#?}");
    assert_eq!(of_type(&events, "merged").len(), 1, "{events:#?}");
    // What the cluster was given: resources, the nodes' variables, never the key.
    let submitted = jobs.jobs();
    assert!(submitted.iter().all(|job| job.entrypoint_num_cpus == Some(1.0)), "{submitted:#?}");
    let memory = Some(64 * 1024 * 1024);
    assert!(submitted.iter().all(|job| job.entrypoint_memory == memory), "{submitted:#?}");
    for job in &submitted {
        assert!(!job.env_vars.values().any(|value| value.contains("sk-test")), "{job:?}");
        assert!(!job.entrypoint.contains("sk-test"), "{job:?}");
        assert!(job.env_vars.contains_key("KESTREL_HOME"), "{job:?}");
    }

    // Lost twice: the attempt fails (and the next one goes on).
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    jobs.lose_node(kestrel_testkit::NodeLoss::of_job_where(|id| {
        id.ends_with("-first-1-implementer-0")
    }));
    jobs.lose_node(kestrel_testkit::NodeLoss::of_job_where(|id| {
        id.ends_with("-first-1-implementer-1")
    }));
    let mut steps = implement("first", &[("first.txt", "one\n")]);
    steps.extend(review("first", 2, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::new(&test, &jobs.address());
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("attempt 1 failed") && err.contains("lost twice"), "{err}");
    let events = test.events(&test.run_id());
    assert_eq!(of_type(&events, "attempt_started").len(), 2, "{events:#?}");
    assert_eq!(of_type(&events, "merged").len(), 1, "{events:#?}");
}

#[test]
fn cancelling_a_run_whose_orchestrator_died_stops_its_running_jobs() {
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    let mut steps = implement_slowly("first", &[("first.txt", "one\n")], 2000);
    steps.extend(review("first", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let cluster = Cluster::new(&test, &jobs.address());
    let graph = test.graph(ONE_TASK);
    let background = test.spawn_swarm(&["run", "--graph", &graph]);
    test.wait_for_event("the implementer's turn started", |event| event["type"] == "turn_started");
    // SAFETY: kill(2) only sends a signal, to the orchestrator this test started.
    unsafe {
        libc::kill(background.pid() as libc::pid_t, libc::SIGKILL);
    }
    let _ = background.wait();
    assert_eq!(cluster.clones_left().len(), 1, "the running job's clone");
    let run = test.run_id();
    let id = format!("kestrel-{run}-first-1-implementer-0");
    assert_eq!(jobs.job(&id).unwrap().status, kestrel_testkit::JobStatus::Running);

    let output = test.swarm_within(&["cancel", &run]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains("stopped 1 Ray job(s)"), "{err}");
    let job = jobs.job(&id).unwrap();
    assert!(job.stop_requested, "{job:?}");
    // The stopped node removed its clone.
    let stopped = jobs.wait_for(&id, WAIT, |job| job.status.is_terminal());
    assert!(stopped.is_some(), "{:?}", jobs.job(&id));
    assert!(cluster.clones_left().is_empty(), "{:?}", cluster.clones_left());
    let events = test.events(&run);
    assert_eq!(of_type(&events, "task_cancelled").len(), 1, "{events:#?}");
}

/// A rejected attempt's second implementer turn is a new job on another node (as far as
/// it knows): it continues the first turn's session from the record the first pushed.
#[test]
fn a_rejected_attempt_goes_on_in_the_same_implementer_session_on_the_next_job() {
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    let mut steps = implement("first", &[("first.txt", "draft\n")]);
    steps.extend(review("first", 1, false, &["first.txt must say one"]));
    steps.extend(implement("first", &[("first.txt", "one\n")]));
    steps.extend(review("first", 2, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let cluster = Cluster::new(&test, &jobs.address());
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let run = test.run_id();
    let branch = format!("kestrel/{run}");
    assert_eq!(git(test.repo.path(), &["show", &format!("{branch}:first.txt")]), "one\n");
    let events = test.events(&run);
    let sessions: Vec<&Value> = of_type(&events, "turn_started")
        .into_iter()
        .filter(|e| e["role"] == "implementer")
        .map(|e| &e["session"])
        .collect();
    assert_eq!(sessions.len(), 2, "{events:#?}");
    assert_eq!(sessions[0], sessions[1], "one implementer session: {events:#?}");
    // The second turn's request carries the first turn and the reviewer's findings.
    let last = test.requests_for(swarm_support::IMPLEMENTER).pop().unwrap();
    let text = last["messages"].to_string();
    assert!(text.contains("draft") && text.contains("first.txt must say one"), "{text}");
    // Each job ran in a clone of its own: the node's home holds the session once.
    let node = kestrel_store::KestrelHome::at(cluster.node_home.path());
    let listed = kestrel_store::SessionIndex::list(&node).unwrap();
    let implementer = sessions[0].as_str().unwrap();
    assert_eq!(listed.iter().filter(|s| s.id.as_str() == implementer).count(), 1);
}

/// A node lost after it pushed the record of its running turn: the retry's node
/// continues that session (one implementer session, its first prompt kept).
#[test]
fn a_node_lost_mid_turn_after_a_record_push_is_continued_in_the_same_session() {
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    let lost = |id: &str| id.ends_with("-first-1-implementer-0");
    let loss = kestrel_testkit::NodeLoss::of_job_where(lost);
    jobs.lose_node(loss.once_log_contains("kestrel.swarm.record_pushed"));
    // The first request streams for ~14 s: the node pushes the record at 10 s, then dies.
    let mut steps = implement_slowly("first", &[("first.txt", "one\n")], 2000);
    steps.truncate(1);
    steps.extend(implement("first", &[("first.txt", "one\n")]));
    steps.extend(review("first", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::new(&test, &jobs.address());
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let run = test.run_id();
    assert!(jobs.job(&format!("kestrel-{run}-first-1-implementer-0")).unwrap().node_lost);
    let events = test.events(&run);
    let sessions: Vec<&Value> = of_type(&events, "turn_started")
        .into_iter()
        .filter(|e| e["role"] == "implementer")
        .map(|e| &e["session"])
        .collect();
    assert_eq!(sessions.len(), 1, "the retry continued the session: {events:#?}");
    assert_eq!(of_type(&events, "merged").len(), 1, "{events:#?}");
}

/// A turn failed on a provider's rate limit (the node's own retries used up) is sent
/// again after a pause, in the same session, as on the local executor: no attempt used.
#[test]
fn a_rate_limited_turn_on_a_node_is_sent_again_in_the_same_session_after_a_pause() {
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    let mut steps = implement("first", &[("first.txt", "one\n")]);
    steps[0] = steps[0].clone().with_fault(kestrel_testkit::Fault::Status {
        status: 429,
        retry_after_secs: Some(0),
        message: None,
        times: Some(2),
    });
    steps.extend(review("first", 1, true, &[]));
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::new(&test, &jobs.address());
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    let run = test.run_id();
    let events = test.events(&run);
    assert_eq!(of_type(&events, "rate_limited").len(), 1, "{events:#?}");
    assert_eq!(of_type(&events, "attempt_started").len(), 1, "{events:#?}");
    let implementer: Vec<&Value> = of_type(&events, "turn_started")
        .into_iter()
        .filter(|e| e["role"] == "implementer")
        .collect();
    assert_eq!(implementer.len(), 1, "one session: {events:#?}");
    let resent = format!("kestrel-{run}-first-1-implementer-r1-0");
    assert_eq!(jobs.job(&resent).unwrap().status, kestrel_testkit::JobStatus::Succeeded);
    assert_eq!(of_type(&events, "merged").len(), 1, "{events:#?}");
}

#[test]
fn a_job_past_its_deadline_is_stopped_and_fails_its_attempt_naming_the_key() {
    let jobs = kestrel_testkit::JobsServer::start().unwrap();
    let mut steps = implement_slowly("first", &[("first.txt", "one\n")], 1500);
    steps.truncate(1);
    let test = SwarmTest::new(&[("README", "toy\n")], steps, "");
    let _cluster = Cluster::with(
        &test,
        &jobs.address(),
        "executor = \"ray\"\nmax_attempts = 1",
        "job_timeout_s = 2\n",
    );
    let graph = test.graph(ONE_TASK);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("job_timeout_s (2 s)"), "{err}");
    let run = test.run_id();
    let job = jobs.job(&format!("kestrel-{run}-first-1-implementer-0")).unwrap();
    assert!(job.stop_requested, "{job:?}");
    assert!(jobs.job(&format!("kestrel-{run}-first-1-implementer-1")).is_none(), "not retried");
}

#[test]
fn an_unreachable_cluster_is_a_usage_error_naming_the_address_and_nothing_starts() {
    let test = SwarmTest::new(&[("README", "toy\n")], Vec::new(), "");
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare"]);
    // Port 9 (discard) is closed on loopback here: nothing answers.
    let ray_table = |address: &str, remote: &str| {
        format!("[swarm.ray]\naddress = \"{address}\"\nremote = \"{remote}\"\n")
    };
    let extra = ray_table("http://127.0.0.1:9", &remote.path().display().to_string());
    test.write_config_parts(&ConfigParts {
        swarm: "executor = \"ray\"",
        extra: &extra,
        ..ConfigParts::default()
    });
    let branches = test.branches();
    let graph = test.graph(TWO_TASKS);
    let output = test.swarm_within(&["run", "--graph", &graph]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("http://127.0.0.1:9"), "{err}");
    assert!(err.contains("ray start --head"), "{err}");
    assert!(test.run_ids().is_empty(), "no run directory: {:?}", test.run_ids());
    assert_eq!(test.branches(), branches);

    // A remote nodes cannot read is refused the same way (with a head, when there is one).
    if let Some(address) = std::env::var(ray::RAY_ADDRESS_VAR).ok().filter(|a| !a.is_empty()) {
        let missing = Path::new("/nonexistent/kestrel-remote.git");
        let extra = ray_table(&address, &missing.display().to_string());
        test.write_config_parts(&ConfigParts {
            swarm: "executor = \"ray\"",
            extra: &extra,
            ..ConfigParts::default()
        });
        let output = test.swarm_within(&["run", "--graph", &graph]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{err}");
        assert!(err.contains("/nonexistent/kestrel-remote.git"), "{err}");
        assert!(test.run_ids().is_empty());
    }
}
