//! The scripted Jobs API through HTTP, as a client sees it; each expected answer was
//! first seen on a live Ray 2.60 head.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{JobStatus, JobsOptions, JobsServer, NodeLoss};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

/// One request on its own connection: the status and the body.
fn call(server: &JobsServer, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(server.socket_address()).unwrap();
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.split(' ').nth(1).unwrap().parse().unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    (status, body.to_owned())
}

fn json_call(server: &JobsServer, method: &str, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|body| body.to_string());
    let (status, text) = call(server, method, path, body.as_deref());
    assert_eq!(status, 200, "{method} {path}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn submit(server: &JobsServer, body: Value) -> Value {
    json_call(server, "POST", "/api/jobs/", Some(body))
}

fn details(server: &JobsServer, id: &str) -> Value {
    json_call(server, "GET", &format!("/api/jobs/{id}"), None)
}

fn logs(server: &JobsServer, id: &str) -> String {
    let answer = json_call(server, "GET", &format!("/api/jobs/{id}/logs"), None);
    answer["logs"].as_str().unwrap().to_owned()
}

/// Polls `GET /api/jobs/{id}` (as a client does) until its status is `status`.
fn poll_until(server: &JobsServer, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let job = details(server, id);
        if job["status"] == status {
            return job;
        }
        assert!(Instant::now() < deadline, "{id} never reached {status}: {job}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the process is gone (or a zombie nobody reaped yet).
fn process_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
        Err(_) => true,
    }
}

fn read_pid(path: &Path) -> String {
    wait_until("the background pid", || {
        std::fs::read_to_string(path).is_ok_and(|text| text.ends_with('\n'))
    });
    std::fs::read_to_string(path).unwrap().trim().to_owned()
}

#[test]
fn version_answers_like_ray() {
    let server = JobsServer::start().unwrap();
    let version = json_call(&server, "GET", "/api/version", None);
    assert_eq!(version["version"], "4");
    assert_eq!(version["ray_version"], "2.60.0");
    assert!(version["session_name"].as_str().unwrap().starts_with("session_"));
    assert_eq!(call(&server, "GET", "/api/nothing", None).0, 404);
    assert_eq!(call(&server, "PUT", "/api/jobs/", None).0, 405);
}

#[test]
fn a_job_runs_with_its_env_vars_to_succeeded_and_its_output_is_its_log() {
    let server = JobsServer::start_with(JobsOptions {
        node_env: vec![("NODE_ONLY".into(), "from-the-node".into())],
        ..JobsOptions::default()
    })
    .unwrap();
    let entrypoint = "echo \"key=$KX node=$NODE_ONLY\"; echo to-stderr >&2";
    let answer = submit(
        &server,
        json!({
            "entrypoint": entrypoint,
            "submission_id": "kestrel-run-task-1-implementer-0",
            "runtime_env": {"env_vars": {"KX": "kv"}},
            "metadata": {"kestrel_run": "run"},
            "entrypoint_num_cpus": 1,
            "entrypoint_memory": 1024,
        }),
    );
    let id = "kestrel-run-task-1-implementer-0";
    assert_eq!(answer, json!({"job_id": id, "submission_id": id}));
    let job = poll_until(&server, id, "SUCCEEDED");
    assert_eq!(job["type"], "SUBMISSION");
    assert_eq!(job["job_id"], Value::Null);
    assert_eq!(job["entrypoint"], entrypoint);
    assert_eq!(job["message"], "Job finished successfully.");
    assert_eq!(job["error_type"], Value::Null);
    assert_eq!(job["driver_exit_code"], 0);
    assert_eq!(job["metadata"], json!({"kestrel_run": "run"}));
    assert_eq!(job["runtime_env"], json!({"env_vars": {"KX": "kv"}}));
    assert!(job["start_time"].as_u64().unwrap() <= job["end_time"].as_u64().unwrap());
    assert!(job["driver_node_id"].as_str().unwrap().len() == 56, "{job}");
    assert!(job["driver_agent_http_address"].as_str().unwrap().starts_with("http://"));
    let log = logs(&server, id);
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines[0].ends_with("INFO job_manager.py:581 -- Runtime env is setting up."), "{log}");
    assert_eq!(lines[1], format!("Running entrypoint for job {id}: {entrypoint}"));
    assert_eq!(&lines[2..], ["key=kv node=from-the-node", "to-stderr"]);
    let snapshot = server.job(id).unwrap();
    assert_eq!(snapshot.status, JobStatus::Succeeded);
    assert_eq!(snapshot.env_vars["KX"], "kv");
    assert_eq!(snapshot.entrypoint_num_cpus, Some(1.0));
    assert_eq!(snapshot.entrypoint_memory, Some(1024));
    assert_eq!(snapshot.logs, log);
}

#[test]
fn a_submission_without_an_id_gets_a_raysubmit_id() {
    let server = JobsServer::start().unwrap();
    let answer = submit(&server, json!({"entrypoint": "true"}));
    let id = answer["submission_id"].as_str().unwrap();
    assert!(id.starts_with("raysubmit_") && id.len() == "raysubmit_".len() + 16, "{id}");
    poll_until(&server, id, "SUCCEEDED");
}

#[test]
fn a_failing_job_reports_its_exit_code_and_the_tail_of_its_log() {
    let server = JobsServer::start().unwrap();
    submit(&server, json!({"entrypoint": "echo before; exit 3", "submission_id": "fails"}));
    let job = poll_until(&server, "fails", "FAILED");
    assert_eq!(job["driver_exit_code"], 3);
    assert_eq!(job["error_type"], "JOB_ENTRYPOINT_COMMAND_ERROR");
    let message = job["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\n"
        ),
        "{message}"
    );
    assert!(message.ends_with("before\n"), "{message}");
}

#[test]
fn stop_terminates_the_whole_process_group_and_reports_stopped() {
    let server = JobsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let entrypoint = format!(
        "trap 'echo got TERM; exit 143' TERM; sleep 300 & echo $! > '{}'; wait",
        pid_file.display()
    );
    submit(&server, json!({"entrypoint": entrypoint, "submission_id": "long"}));
    poll_until(&server, "long", "RUNNING");
    let background = read_pid(&pid_file);
    assert_eq!(json_call(&server, "POST", "/api/jobs/long/stop", None), json!({"stopped": true}));
    let job = poll_until(&server, "long", "STOPPED");
    assert_eq!(job["message"], "Job was intentionally stopped.");
    assert_eq!(job["driver_exit_code"], Value::Null);
    assert!(logs(&server, "long").ends_with("got TERM\n"), "SIGTERM first, as Ray");
    wait_until("the background sleep to die with its group", || process_gone(&background));
    assert_eq!(json_call(&server, "POST", "/api/jobs/long/stop", None), json!({"stopped": false}));
    assert!(server.job("long").unwrap().stop_requested);
}

#[test]
fn a_second_submission_with_the_same_id_is_refused_and_the_first_job_is_untouched() {
    let server = JobsServer::start().unwrap();
    submit(&server, json!({"entrypoint": "echo first", "submission_id": "same"}));
    let (status, body) = call(
        &server,
        "POST",
        "/api/jobs/",
        Some(r#"{"entrypoint": "echo second", "submission_id": "same"}"#),
    );
    assert_eq!(status, 500, "Ray's head turns its agent's 400 into a 500: {body}");
    assert!(
        body.contains("ValueError: Job with submission_id same already exists. Please use a different submission_id."),
        "{body}"
    );
    let job = poll_until(&server, "same", "SUCCEEDED");
    assert_eq!(job["entrypoint"], "echo first");
    assert!(logs(&server, "same").ends_with("echo first\nfirst\n"));
    assert_eq!(server.jobs().len(), 1);
}

#[test]
fn bad_submissions_are_refused_with_rays_errors_and_nothing_runs() {
    let server = JobsServer::start().unwrap();
    let refused = [
        (r#"{"submission_id": "x"}"#, 400, "missing 1 required positional argument: 'entrypoint'"),
        (r#"{"entrypoint": 7}"#, 400, "TypeError: entrypoint must be a string, got <class 'int'>"),
        (r#"{"entrypoint": "true", "bogus": 1}"#, 400, "unexpected keyword argument 'bogus'"),
        (r#"{"entrypoint": "true", "metadata": {"a": 1}}"#, 400, "metadata values must be strings"),
        (
            r#"{"entrypoint": "true", "entrypoint_memory": 1.5}"#,
            400,
            "entrypoint_memory must be an integer",
        ),
        (r#"{"entrypoint": "true", "runtime_env": []}"#, 400, "runtime_env must be a dict"),
        ("{not json", 500, "Server got itself in trouble"),
    ];
    for (body, status, error) in refused {
        let (got, text) = call(&server, "POST", "/api/jobs/", Some(body));
        assert_eq!(got, status, "{body}: {text}");
        assert!(text.contains(error), "{body}: {text}");
    }
    assert!(server.jobs().is_empty());
    // Null fields are dropped first, as Ray does.
    submit(&server, json!({"entrypoint": "true", "submission_id": "ok", "metadata": null}));
    poll_until(&server, "ok", "SUCCEEDED");
}

#[test]
fn env_vars_that_are_not_strings_fail_the_job_as_ray_does() {
    let server = JobsServer::start().unwrap();
    let body = json!({"entrypoint": "true", "submission_id": "env", "runtime_env": {"env_vars": {"A": 1}}});
    submit(&server, body);
    let job = poll_until(&server, "env", "FAILED");
    assert_eq!(job["error_type"], "JOB_SUPERVISOR_ACTOR_START_FAILURE");
    let message = job["message"].as_str().unwrap();
    assert!(message.starts_with("Failed to start supervisor actor env: 'runtime_env['env_vars'] must be of type Dict[str, str], but the value 1 is of type <class 'int'>'"), "{message}");
}

#[test]
fn unknown_jobs_are_404_on_every_route() {
    let server = JobsServer::start().unwrap();
    for (method, path) in [
        ("GET", "/api/jobs/nope"),
        ("GET", "/api/jobs/nope/logs"),
        ("POST", "/api/jobs/nope/stop"),
        ("DELETE", "/api/jobs/nope"),
    ] {
        assert_eq!(call(&server, method, path, None), (404, "Job nope does not exist".to_owned()));
    }
}

#[test]
fn delete_refuses_a_job_that_runs_and_forgets_one_that_ended() {
    let server = JobsServer::start().unwrap();
    submit(&server, json!({"entrypoint": "sleep 300", "submission_id": "busy"}));
    poll_until(&server, "busy", "RUNNING");
    let (status, body) = call(&server, "DELETE", "/api/jobs/busy", None);
    assert_eq!(status, 500);
    assert!(
        body.contains("RuntimeError: Attempted to delete job 'busy', but it is in a non-terminal state RUNNING."),
        "{body}"
    );
    json_call(&server, "POST", "/api/jobs/busy/stop", None);
    poll_until(&server, "busy", "STOPPED");
    assert_eq!(json_call(&server, "DELETE", "/api/jobs/busy", None), json!({"deleted": true}));
    assert_eq!(call(&server, "GET", "/api/jobs/busy", None).0, 404);
    assert!(server.job("busy").is_none());
}

#[test]
fn a_lost_node_kills_the_job_and_fails_it_with_rays_message_once() {
    let server = JobsServer::start().unwrap();
    server.lose_node(
        NodeLoss::of_job_where(|id| id.starts_with("lost-")).once_log_contains("working"),
    );
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // `work''ing` prints `working` but the log's "Running entrypoint ..." line (which may
    // come first) does not hold it: the loss waits for the shell to have written the pid.
    let entrypoint =
        format!("sleep 300 & echo $! > '{}'; echo work''ing; wait", pid_file.display());
    submit(&server, json!({"entrypoint": entrypoint, "submission_id": "lost-1"}));
    let job = poll_until(&server, "lost-1", "FAILED");
    assert_eq!(job["error_type"], "JOB_SUPERVISOR_ACTOR_DIED");
    assert_eq!(job["driver_exit_code"], Value::Null);
    let message = job["message"].as_str().unwrap();
    assert!(
        message.starts_with("Job supervisor actor died: The actor died unexpectedly"),
        "{message}"
    );
    assert!(message.contains("\tname: _ray_internal_job_actor_lost-1\n"), "{message}");
    assert!(message.contains("The actor died because its node has died. Node Id: "), "{message}");
    let background = read_pid(&pid_file);
    wait_until("the node's processes to die", || process_gone(&background));
    // The head cannot reach the dead node's agent for the logs; the job cannot be stopped.
    let (status, body) = call(&server, "GET", "/api/jobs/lost-1/logs", None);
    assert_eq!(status, 500);
    assert!(body.contains("ConnectionRefusedError"), "{body}");
    assert_eq!(
        json_call(&server, "POST", "/api/jobs/lost-1/stop", None),
        json!({"stopped": false})
    );
    let snapshot = server.job("lost-1").unwrap();
    assert!(snapshot.node_lost && snapshot.logs.contains("working"), "{snapshot:?}");
    // The loss happened once: the retry runs, on another node.
    submit(&server, json!({"entrypoint": "echo working", "submission_id": "lost-2"}));
    let retry = poll_until(&server, "lost-2", "SUCCEEDED");
    assert_ne!(retry["driver_node_id"], job["driver_node_id"]);
}

#[test]
fn a_node_loss_of_the_nth_job_is_noticed_after_its_delay() {
    let server = JobsServer::start().unwrap();
    server.lose_node(NodeLoss::of_nth_job(2).detected_after(Duration::from_secs(5)));
    submit(&server, json!({"entrypoint": "true", "submission_id": "first"}));
    poll_until(&server, "first", "SUCCEEDED");
    submit(&server, json!({"entrypoint": "sleep 300", "submission_id": "second"}));
    let lost = server.wait_for("second", WAIT, |job| job.node_lost).unwrap();
    assert!(lost.node_lost, "{lost:?}");
    // Before the head notices: still RUNNING, but its logs are already unreachable.
    assert_eq!(details(&server, "second")["status"], "RUNNING");
    assert_eq!(call(&server, "GET", "/api/jobs/second/logs", None).0, 500);
    poll_until(&server, "second", "FAILED");
}

#[test]
fn lose_node_now_hits_a_running_job_only() {
    let server = JobsServer::start().unwrap();
    assert!(!server.lose_node_now("nope"));
    submit(&server, json!({"entrypoint": "sleep 300", "submission_id": "victim"}));
    poll_until(&server, "victim", "RUNNING");
    assert!(server.lose_node_now("victim"));
    poll_until(&server, "victim", "FAILED");
    assert!(!server.lose_node_now("victim"));
}

#[test]
fn jobs_wait_for_free_cpus_and_a_stopped_waiting_job_never_runs() {
    let server =
        JobsServer::start_with(JobsOptions { num_cpus: 1.0, ..JobsOptions::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let gate = dir.path().join("gate");
    let first = format!("while [ ! -e '{}' ]; do sleep 0.05; done", gate.display());
    submit(&server, json!({"entrypoint": first, "submission_id": "a", "entrypoint_num_cpus": 1}));
    poll_until(&server, "a", "RUNNING");
    submit(
        &server,
        json!({"entrypoint": "echo b ran", "submission_id": "b", "entrypoint_num_cpus": 1}),
    );
    submit(
        &server,
        json!({"entrypoint": "echo c ran", "submission_id": "c", "entrypoint_num_gpus": 1}),
    );
    let waiting = details(&server, "b");
    assert_eq!(waiting["status"], "PENDING");
    assert_eq!(
        waiting["message"],
        "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available."
    );
    assert_eq!(logs(&server, "b"), "", "no driver yet: Ray answers no logs");
    std::fs::write(&gate, "").unwrap();
    poll_until(&server, "a", "SUCCEEDED");
    poll_until(&server, "b", "SUCCEEDED");
    // No GPU on this node: c waits for good, until stopped.
    assert_eq!(details(&server, "c")["status"], "PENDING");
    assert_eq!(json_call(&server, "POST", "/api/jobs/c/stop", None), json!({"stopped": true}));
    poll_until(&server, "c", "STOPPED");
    assert!(!server.job("c").unwrap().logs.contains("c ran"));
    let listed = json_call(&server, "GET", "/api/jobs/", None);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["submission_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c"]);
}

#[test]
fn dropping_the_server_kills_its_jobs() {
    let server = JobsServer::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let entrypoint = format!("sleep 300 & echo $! > '{}'; wait", pid_file.display());
    submit(&server, json!({"entrypoint": entrypoint, "submission_id": "left"}));
    let background = read_pid(&pid_file);
    drop(server);
    wait_until("the job's processes to die with the server", || process_gone(&background));
}
