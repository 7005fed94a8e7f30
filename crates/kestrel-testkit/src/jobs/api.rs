//! The HTTP side: Ray 2.60's job routes, the checks of its `JobSubmitRequest`, and its
//! answers (`JobDetails`, `{"logs"}`, `{"stopped"}`, `{"deleted"}`; errors as text/plain
//! Python tracebacks, whose last line is what a client should show).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Job, JobStatus, Shared, run};
use crate::http::HttpRequest;

/// Ray's version API (dashboard module version "4").
const API_VERSION: &str = "4";
const RAY_VERSION: &str = "2.60.0";

/// One answer.
pub(super) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    fn json(value: &Value) -> Response {
        Response {
            status: 200,
            content_type: "application/json; charset=utf-8",
            body: value.to_string(),
        }
    }

    pub fn text(status: u16, body: String) -> Response {
        Response { status, content_type: "text/plain; charset=utf-8", body }
    }

    /// An exception as Ray's job head answers it: a traceback ending in `last_line`.
    fn traceback(status: u16, last_line: &str) -> Response {
        Response::text(
            status,
            format!(
                "Traceback (most recent call last):\n  File \"scripted Jobs API (kestrel-testkit)\"\n{last_line}\n"
            ),
        )
    }
}

/// A submission that passed `JobSubmitRequest`'s checks.
#[derive(Debug, Clone)]
pub(super) struct Submission {
    pub submission_id: String,
    pub entrypoint: String,
    pub runtime_env: Option<Map<String, Value>>,
    pub env_vars: BTreeMap<String, String>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub entrypoint_num_cpus: Option<f64>,
    pub entrypoint_num_gpus: Option<f64>,
    pub entrypoint_memory: Option<u64>,
    pub entrypoint_resources: Option<BTreeMap<String, f64>>,
}

impl Submission {
    /// Whether the job asks for resources (Ray's `resources_specified`).
    pub fn asks_for_resources(&self) -> bool {
        self.entrypoint_num_cpus.is_some_and(|cpus| cpus > 0.0)
            || self.entrypoint_num_gpus.is_some_and(|gpus| gpus > 0.0)
            || self.entrypoint_memory.is_some_and(|memory| memory > 0)
            || self.entrypoint_resources.as_ref().is_some_and(|resources| !resources.is_empty())
    }
}

pub(super) fn respond(shared: &Arc<Shared>, request: &HttpRequest) -> Response {
    let method = request.method.as_str();
    match request.path() {
        "/api/version" => match method {
            "GET" => version(shared),
            _ => method_not_allowed(),
        },
        "/api/jobs/" => match method {
            "GET" => list(shared),
            "POST" => submit(shared, &request.body),
            _ => method_not_allowed(),
        },
        path => {
            let Some(job_path) = path.strip_prefix("/api/jobs/") else { return not_found() };
            let (id, action) = job_path.split_once('/').unwrap_or((job_path, ""));
            if id.is_empty() {
                return not_found();
            }
            match (method, action) {
                ("GET", "") => details(shared, id),
                ("DELETE", "") => delete(shared, id),
                ("GET", "logs") => logs(shared, id),
                ("POST", "stop") => stop(shared, id),
                (_, "" | "logs" | "stop") => method_not_allowed(),
                _ => not_found(),
            }
        }
    }
}

fn not_found() -> Response {
    Response::text(404, "404: Not Found".to_owned())
}

fn method_not_allowed() -> Response {
    Response::text(405, "405: Method Not Allowed".to_owned())
}

fn no_such_job(id: &str) -> Response {
    Response::text(404, format!("Job {id} does not exist"))
}

fn version(shared: &Shared) -> Response {
    Response::json(&json!({
        "version": API_VERSION,
        "ray_version": RAY_VERSION,
        "ray_commit": "scripted",
        "session_name": format!("session_scripted_{}", shared.address.port()),
    }))
}

fn list(shared: &Shared) -> Response {
    let state = shared.lock();
    let mut jobs: Vec<&Job> = state.jobs.values().collect();
    jobs.sort_by_key(|job| job.ordinal);
    let details: Vec<Value> = jobs.into_iter().map(|job| job_details(shared, job)).collect();
    Response::json(&Value::Array(details))
}

fn details(shared: &Shared, id: &str) -> Response {
    let state = shared.lock();
    match state.jobs.get(id) {
        Some(job) => Response::json(&job_details(shared, job)),
        None => no_such_job(id),
    }
}

/// Ray's `JobDetails` of a submission job.
fn job_details(shared: &Shared, job: &Job) -> Value {
    let submission = &job.submission;
    json!({
        "type": "SUBMISSION",
        "job_id": null,
        "submission_id": submission.submission_id,
        "driver_info": null,
        "status": job.status.as_str(),
        "entrypoint": submission.entrypoint,
        "message": job.message,
        "error_type": job.error_type,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "metadata": submission.metadata,
        "runtime_env": submission.runtime_env,
        "driver_agent_http_address": job.driver_node.as_ref().map(|_| format!("http://{}", shared.address)),
        "driver_node_id": job.driver_node,
        "driver_exit_code": job.driver_exit_code,
    })
}

fn logs(shared: &Shared, id: &str) -> Response {
    let state = shared.lock();
    let Some(job) = state.jobs.get(id) else { return no_such_job(id) };
    if job.node_lost {
        // The head asks the dead node's agent for the file.
        return Response::traceback(
            500,
            &format!(
                "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', {})",
                shared.address.port()
            ),
        );
    }
    // Before its driver starts a job has no agent to ask: Ray answers no logs.
    let logs = match job.driver_node {
        Some(_) => run::read_log(&job.log_path),
        None => String::new(),
    };
    Response::json(&json!({ "logs": logs }))
}

fn stop(shared: &Arc<Shared>, id: &str) -> Response {
    let mut state = shared.lock();
    let Some(job) = state.jobs.get_mut(id) else { return no_such_job(id) };
    // Ray: true while the job's supervisor lives, i.e. not terminal and its node not lost.
    let stopped = !job.status.is_terminal() && !job.node_lost;
    if stopped {
        job.stop_requested = true;
        match &job.control {
            Some(control) => {
                let _ = control.send(run::Control::Stop);
            }
            // Not started yet: it never will be.
            None => run::finish(job, JobStatus::Stopped, None, None),
        }
    }
    Response::json(&json!({ "stopped": stopped }))
}

fn delete(shared: &Shared, id: &str) -> Response {
    let mut state = shared.lock();
    let Some(job) = state.jobs.get(id) else { return no_such_job(id) };
    if !job.status.is_terminal() {
        return Response::traceback(
            500,
            &format!(
                "RuntimeError: Attempted to delete job '{id}', but it is in a non-terminal state {}.",
                job.status.as_str()
            ),
        );
    }
    if let Some(job) = state.jobs.remove(id) {
        let _ = std::fs::remove_file(&job.log_path);
    }
    Response::json(&json!({ "deleted": true }))
}

fn submit(shared: &Arc<Shared>, body: &[u8]) -> Response {
    // aiohttp's answer to a body that is not JSON.
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) else {
        return Response::text(
            500,
            "500 Internal Server Error\n\nServer got itself in trouble".into(),
        );
    };
    let id_for_new = || shared.ids.next("raysubmit_", 16);
    let submission = match parse_submission(fields, id_for_new) {
        Ok(submission) => submission,
        Err(error) => return Response::traceback(400, &error),
    };
    let id = submission.submission_id.clone();
    let mut state = shared.lock();
    if state.jobs.contains_key(&id) {
        // The agent's 400 (a ValueError) reaches the client as the head's 500.
        return Response::traceback(
            500,
            &format!(
                "RuntimeError: Request failed with status code 400: Traceback (most recent call last):\n\
                 ValueError: Job with submission_id {id} already exists. Please use a different submission_id.\n."
            ),
        );
    }
    run::accept(shared, &mut state, submission);
    drop(state);
    Response::json(&json!({ "job_id": id, "submission_id": id }))
}

/// Python's name of a JSON value's type, as Ray's TypeErrors print it.
fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<class 'NoneType'>",
        Value::Bool(_) => "<class 'bool'>",
        Value::Number(number) if number.is_i64() || number.is_u64() => "<class 'int'>",
        Value::Number(_) => "<class 'float'>",
        Value::String(_) => "<class 'str'>",
        Value::Array(_) => "<class 'list'>",
        Value::Object(_) => "<class 'dict'>",
    }
}

/// `JobSubmitRequest(**body)` with its `__post_init__` checks, in Ray's order; the error
/// is the exception's line.
fn parse_submission(
    mut fields: Map<String, Value>,
    new_id: impl FnOnce() -> String,
) -> Result<Submission, String> {
    // Ray drops keys whose value is null first (newer clients, older servers).
    fields.retain(|_, value| !value.is_null());
    const KNOWN: [&str; 10] = [
        "entrypoint",
        "submission_id",
        "job_id",
        "runtime_env",
        "metadata",
        "entrypoint_num_cpus",
        "entrypoint_num_gpus",
        "entrypoint_memory",
        "entrypoint_resources",
        "entrypoint_label_selector",
    ];
    if let Some(unknown) = fields.keys().find(|key| !KNOWN.contains(&key.as_str())) {
        return Err(format!(
            "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument '{unknown}'"
        ));
    }
    let Some(entrypoint) = fields.get("entrypoint") else {
        return Err("TypeError: JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'".into());
    };
    let Value::String(entrypoint) = entrypoint else {
        return Err(format!(
            "TypeError: entrypoint must be a string, got {}",
            python_type(entrypoint)
        ));
    };
    let mut ids = Vec::new();
    for key in ["submission_id", "job_id"] {
        match fields.get(key) {
            None => ids.push(None),
            Some(Value::String(id)) => ids.push(Some(id.clone())),
            Some(other) => {
                return Err(format!(
                    "TypeError: {key} must be a string if provided, got {}",
                    python_type(other)
                ));
            }
        }
    }
    let runtime_env = match fields.get("runtime_env") {
        None => None,
        Some(Value::Object(env)) => Some(env.clone()),
        Some(other) => {
            return Err(format!(
                "TypeError: runtime_env must be a dict, got {}",
                python_type(other)
            ));
        }
    };
    let metadata = match fields.get("metadata") {
        None => None,
        Some(Value::Object(metadata)) => {
            let mut map = BTreeMap::new();
            for (key, value) in metadata {
                let Value::String(value) = value else {
                    return Err(format!(
                        "TypeError: metadata values must be strings, got {}",
                        python_type(value)
                    ));
                };
                map.insert(key.clone(), value.clone());
            }
            Some(map)
        }
        Some(other) => {
            return Err(format!("TypeError: metadata must be a dict, got {}", python_type(other)));
        }
    };
    let number = |key: &str| -> Result<Option<f64>, String> {
        match fields.get(key) {
            None => Ok(None),
            Some(Value::Number(number)) => Ok(number.as_f64()),
            Some(other) => {
                Err(format!("TypeError: {key} must be a number, got {}", python_type(other)))
            }
        }
    };
    let entrypoint_num_cpus = number("entrypoint_num_cpus")?;
    let entrypoint_num_gpus = number("entrypoint_num_gpus")?;
    let entrypoint_memory = match fields.get("entrypoint_memory") {
        None => None,
        Some(Value::Number(number)) if number.as_u64().is_some() => number.as_u64(),
        Some(other) => {
            return Err(format!(
                "TypeError: entrypoint_memory must be an integer, got {}",
                python_type(other)
            ));
        }
    };
    let entrypoint_resources = match fields.get("entrypoint_resources") {
        None => None,
        Some(Value::Object(resources)) => {
            let mut map = BTreeMap::new();
            for (key, value) in resources {
                let Some(amount) = value.as_f64() else {
                    return Err(format!(
                        "TypeError: entrypoint_resources values must be numbers, got {}",
                        python_type(value)
                    ));
                };
                map.insert(key.clone(), amount);
            }
            Some(map)
        }
        Some(other) => {
            return Err(format!(
                "TypeError: entrypoint_resources must be a dict, got {}",
                python_type(other)
            ));
        }
    };
    match fields.get("entrypoint_label_selector") {
        None | Some(Value::Object(_)) => {}
        Some(other) => {
            return Err(format!(
                "TypeError: entrypoint_label_selector must be a dict, got {}",
                python_type(other)
            ));
        }
    }
    let submission_id = match ids.as_slice() {
        [Some(id), _] | [None, Some(id)] => id.clone(),
        _ => new_id(),
    };
    Ok(Submission {
        submission_id,
        entrypoint: entrypoint.clone(),
        runtime_env,
        env_vars: BTreeMap::new(),
        metadata,
        entrypoint_num_cpus,
        entrypoint_num_gpus,
        entrypoint_memory,
        entrypoint_resources,
    })
}

/// The runtime environment's `env_vars`, or why the job's supervisor cannot start (Ray
/// accepts the submission and fails the job with this). Only `env_vars` is simulated.
pub(super) fn env_vars(
    runtime_env: Option<&Map<String, Value>>,
) -> Result<BTreeMap<String, String>, String> {
    let Some(runtime_env) = runtime_env else { return Ok(BTreeMap::new()) };
    if let Some(other) = runtime_env.keys().find(|key| key.as_str() != "env_vars") {
        return Err(format!(
            "scripted Jobs API: the runtime_env field {other:?} is not simulated (only env_vars)"
        ));
    }
    let mut vars = BTreeMap::new();
    match runtime_env.get("env_vars") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (key, value) in map {
                let Value::String(value) = value else {
                    return Err(format!(
                        "runtime_env['env_vars'] must be of type Dict[str, str], but the value {value} is of type {}",
                        python_type(value)
                    ));
                };
                vars.insert(key.clone(), value.clone());
            }
        }
        Some(other) => {
            return Err(format!(
                "runtime_env['env_vars'] must be of type Dict[str, str], got {}",
                python_type(other)
            ));
        }
    }
    Ok(vars)
}
