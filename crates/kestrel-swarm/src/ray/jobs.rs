//! Ray's Jobs REST API (the dashboard's `/api/jobs/`), as Kestrel uses it: submit, status,
//! logs, stop. JSON over HTTP with our own client; nothing of Ray's Python SDK.

use crate::SwarmError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A job's state as Ray reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobStatus {
    Pending,
    Running,
    Stopped,
    Succeeded,
    Failed,
}

impl JobStatus {
    pub fn is_terminal(self) -> bool {
        matches!(self, JobStatus::Stopped | JobStatus::Succeeded | JobStatus::Failed)
    }
}

/// What `GET /api/jobs/<id>` (and each entry of `GET /api/jobs/`) says, the parts used.
#[derive(Debug, Clone, Deserialize)]
pub struct JobInfo {
    pub status: JobStatus,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub submission_id: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// `POST /api/jobs/`'s body (Ray's `JobSubmitRequest`).
#[derive(Debug, Clone, Serialize)]
pub struct JobRequest {
    pub entrypoint: String,
    pub submission_id: String,
    pub runtime_env: RuntimeEnv,
    pub metadata: BTreeMap<String, String>,
    pub entrypoint_num_cpus: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint_memory: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuntimeEnv {
    pub env_vars: BTreeMap<String, String>,
}

/// A client of one cluster's Jobs API.
#[derive(Debug, Clone)]
pub struct Jobs {
    address: String,
    http: reqwest::Client,
}

/// A job the API does not know (`404`).
const NOT_FOUND: u16 = 404;

impl Jobs {
    pub fn new(address: &str) -> Result<Jobs, SwarmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|error| SwarmError::Ray(format!("cannot make an HTTP client: {error}")))?;
        Ok(Jobs { address: address.trim_end_matches('/').to_string(), http })
    }

    /// The cluster's Ray version: whether the API answers at all.
    pub async fn version(&self) -> Result<String, SwarmError> {
        #[derive(Deserialize)]
        struct Version {
            ray_version: String,
        }
        let version: Version = self.get("/api/version").await?.ok_or_else(|| {
            SwarmError::Ray(format!("{} has no Ray Jobs API (/api/version: 404)", self.address))
        })?;
        Ok(version.ray_version)
    }

    /// Submits a job; a job with this id already known is not an error (a resumed
    /// orchestrator submits the same ids again and follows what runs).
    pub async fn submit(&self, request: &JobRequest) -> Result<(), SwarmError> {
        let url = format!("{}/api/jobs/", self.address);
        let response =
            self.http.post(&url).json(request).send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        if body.contains("already exists") {
            return Ok(());
        }
        Err(SwarmError::Ray(format!(
            "the Ray Jobs API at {} refused job {}: HTTP {status}: {}",
            self.address,
            request.submission_id,
            last_line(&body)
        )))
    }

    /// The job's state; `None` when the cluster does not know it (a new cluster, or it
    /// was deleted).
    pub async fn info(&self, id: &str) -> Result<Option<JobInfo>, SwarmError> {
        self.get(&format!("/api/jobs/{id}")).await
    }

    /// Every job the cluster knows.
    pub async fn list(&self) -> Result<Vec<JobInfo>, SwarmError> {
        Ok(self.get("/api/jobs/").await?.unwrap_or_default())
    }

    /// Everything the job printed so far.
    pub async fn logs(&self, id: &str) -> Result<String, SwarmError> {
        #[derive(Deserialize)]
        struct Logs {
            logs: String,
        }
        let logs: Option<Logs> = self.get(&format!("/api/jobs/{id}/logs")).await?;
        Ok(logs.map(|logs| logs.logs).unwrap_or_default())
    }

    /// Asks Ray to stop the job (its process tree gets SIGTERM, then SIGKILL).
    pub async fn stop(&self, id: &str) -> Result<(), SwarmError> {
        let url = format!("{}/api/jobs/{id}/stop", self.address);
        let response = self.http.post(&url).send().await.map_err(|e| self.unreachable(e))?;
        if response.status().is_success() || response.status().as_u16() == NOT_FOUND {
            return Ok(());
        }
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        Err(SwarmError::Ray(format!("stopping job {id}: HTTP {status}: {}", last_line(&body))))
    }

    async fn get<T: for<'de> Deserialize<'de>>(&self, path: &str) -> Result<Option<T>, SwarmError> {
        let url = format!("{}{path}", self.address);
        let response = self.http.get(&url).send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if status.as_u16() == NOT_FOUND {
            return Ok(None);
        }
        let body = response.text().await.map_err(|e| self.unreachable(e))?;
        if !status.is_success() {
            return Err(SwarmError::Ray(format!(
                "the Ray Jobs API at {} answered {path} with HTTP {status}: {}",
                self.address,
                last_line(&body)
            )));
        }
        serde_json::from_str(&body).map(Some).map_err(|error| {
            SwarmError::Ray(format!(
                "the Ray Jobs API at {} answered {path} with something unexpected ({error})",
                self.address
            ))
        })
    }

    fn unreachable(&self, error: reqwest::Error) -> SwarmError {
        SwarmError::Ray(format!("cannot reach the Ray Jobs API at {}: {error}", self.address))
    }
}

/// Ray answers errors with a Python traceback: its last line says what went wrong.
fn last_line(body: &str) -> &str {
    body.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("").trim()
}
