//! `[agent]`: how a session runs its tools, subagents and compaction, and how long an
//! idle worker lives. Unset keys take the `DEFAULT_*` values below.

use super::ConfigError;
use super::file::AgentTable;
use std::path::PathBuf;

/// How long an idle worker with no client lives when `[agent] idle_worker_minutes` is unset.
pub const DEFAULT_IDLE_WORKER_MINUTES: u64 = 30;

/// The share of the context window at which a session compacts itself when
/// `[agent] compact_at` is unset.
pub const DEFAULT_COMPACT_AT: f64 = 0.85;

/// How many subagents (`task` calls) of one step run at once when `[agent] max_subagents`
/// is unset.
pub const DEFAULT_MAX_SUBAGENTS: u32 = 4;

/// `[agent]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentSettings {
    /// How many tool calls of one model response may run at once; `None`: the agent's default.
    pub max_parallel_tools: Option<u32>,
    /// How long a worker with no client stays alive.
    pub idle_worker_minutes: u64,
    /// The share of the model's context window (0 < x <= 1) past which the session
    /// compacts its conversation before the next model request.
    pub compact_at: f64,
    /// How many `task` calls (subagents) of one model response run at once; at least 1.
    pub max_subagents: u32,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            max_parallel_tools: None,
            idle_worker_minutes: DEFAULT_IDLE_WORKER_MINUTES,
            compact_at: DEFAULT_COMPACT_AT,
            max_subagents: DEFAULT_MAX_SUBAGENTS,
        }
    }
}

/// Checks `[agent]` and fills in the defaults; `path` gives the file an error names.
pub(super) fn resolve_agent(
    table: AgentTable,
    path: impl Fn() -> PathBuf,
) -> Result<AgentSettings, ConfigError> {
    if let Some(fraction) = table.compact_at
        && !(fraction > 0.0 && fraction <= 1.0)
    {
        return Err(ConfigError::Invalid {
            path: path(),
            message: format!(
                "`[agent] compact_at` is the share of the context window at which to compact: \
                 a number above 0 and at most 1 (e.g. 0.85), got {fraction}"
            ),
        });
    }
    if table.max_subagents == Some(0) {
        return Err(ConfigError::Invalid {
            path: path(),
            message: "`[agent] max_subagents` must be at least 1".into(),
        });
    }
    Ok(AgentSettings {
        max_parallel_tools: table.max_parallel_tools,
        idle_worker_minutes: table.idle_worker_minutes.unwrap_or(DEFAULT_IDLE_WORKER_MINUTES),
        compact_at: table.compact_at.unwrap_or(DEFAULT_COMPACT_AT),
        max_subagents: table.max_subagents.unwrap_or(DEFAULT_MAX_SUBAGENTS),
    })
}
