//! Errors that stop a session before or outside a turn. Failures inside a turn are
//! results (`TurnResult` with `failed`), not errors.

use kestrel_model::ModelError;
use kestrel_store::{ConfigError, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write the session record: {0}")]
    Record(StoreError),
    #[error(
        "no model configured: pass --model PROVIDER/MODEL, set KESTREL_MODEL, or set `model` in {config}"
    )]
    NoModel { config: String },
    #[error(
        "unknown provider `{provider}` in model `{model}`: known providers are {known}; add [providers.{provider}] to {config}"
    )]
    UnknownProvider { provider: String, model: String, known: String, config: String },
    #[error("no API key for provider `{provider}`: set the environment variable {variable}")]
    MissingApiKey { provider: String, variable: String },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{0}")]
    Usage(String),
    #[error("cannot read the prompt from stdin: {0}")]
    Stdin(std::io::Error),
    #[error("cannot write {path}: {source}")]
    Output { path: String, source: std::io::Error },
}

impl AgentError {
    /// The process exit code for this error (ARCHITECTURE §7): 2 for usage and config
    /// errors the user must fix, 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            AgentError::Config(_)
            | AgentError::NoModel { .. }
            | AgentError::UnknownProvider { .. }
            | AgentError::MissingApiKey { .. }
            | AgentError::Usage(_) => 2,
            AgentError::Model(
                ModelError::MissingApiKey { .. } | ModelError::InvalidConfig { .. },
            ) => 2,
            AgentError::Store(error) if error.is_usage() => 2,
            AgentError::Store(_)
            | AgentError::Record(_)
            | AgentError::Model(_)
            | AgentError::Stdin(_)
            | AgentError::Output { .. } => 1,
        }
    }
}
