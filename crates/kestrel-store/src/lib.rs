//! Everything under `$KESTREL_HOME`: paths, config loading, session records
//! (locked append, streaming replay, fork), the session index (and the ACP
//! `session/list` answer built from it), the model catalog's cache, and swarm runs'
//! directories (graph, events, lock, status).

mod activity;
mod catalog_cache;
mod config;
mod error;
mod file_lock;
mod index;
mod paths;
mod record;
mod record_copy;
mod replay;
mod session_hold;
mod session_list;
mod storage;
mod swarm_run;

pub use catalog_cache::{CachedCatalog, CatalogCache, CatalogCacheError};
pub use config::{
    AgentSettings, Config, ConfigError, DEFAULT_CATALOG_URL, DEFAULT_COMPACT_AT,
    DEFAULT_IDLE_WORKER_MINUTES, DEFAULT_MAX_SUBAGENTS, DEFAULT_SWARM_MAX_ATTEMPTS,
    DEFAULT_SWARM_MAX_PARALLEL, DEFAULT_SWARM_VERIFY_TIMEOUT_S, Executor, McpServerSettings,
    McpTransport, PermissionSettings, ProjectPermissions, ProviderSettings, RaySettings,
    ReasoningEffort, ReviewerSettings, SandboxSettings, StorageSettings, SwarmRoleSettings,
    SwarmSettings, WireApiSetting, split_model_ref,
};
pub use error::StoreError;
pub use index::{SessionIndex, SessionSummary};
pub use paths::{KestrelHome, ensure_dir, replace_file};
pub use record::{SessionRecord, fork, read_header};
pub use record_copy::{export_record, import_record};
pub use replay::{Replay, read_record};
pub use session_hold::SessionHold;
pub use session_list::list_sessions_response;
pub use storage::{
    CleanUp, RemovedSession, SessionDisk, clean_checkpoints, clean_checkpoints_if_due, dir_size,
    remove_sessions, session_disk, sessions_older_than,
};
pub use swarm_run::{
    ClimbStatus, EventLog, ExperimentStatus, GraphError, RunLock, RunStatus, RunSummary,
    SkippedEvents, SwarmRunDir, TaskStatus, TokenCounts, experiment_table, graph_to_toml,
    list_runs, parse_graph,
};
