//! A swarm run's directory, `$KESTREL_HOME/swarm/<run>/` (ARCHITECTURE §10): its task
//! graph (`graph.toml`, written first), its events (`events.jsonl`, append-only, the
//! truth a resume rebuilds from), role logs (`logs/`) and the orchestrator's `lock`.
//! Directories are 0700 and files 0600, like session records.

mod climb;
mod events;
mod graph;
mod lock;
mod status;

pub use climb::{ClimbStatus, ExperimentStatus, experiment_table};
pub use events::{EventLog, SkippedEvents};
pub use graph::{GraphError, graph_to_toml, parse_graph};
pub use lock::RunLock;
pub use status::{RunStatus, RunSummary, TaskStatus, TokenCounts, list_runs};

use crate::StoreError;
use crate::paths::{self, KestrelHome};
use kestrel_protocol::swarm::SwarmGraph;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

/// The longest run id (it names a directory and part of branch names).
const MAX_RUN_ID_LEN: usize = 128;

/// At most this many candidates are named in an ambiguous-prefix error.
const MAX_CANDIDATES: usize = 10;

/// One run's directory. Holds no file open: reading and appending may happen from
/// several processes (the orchestrator, `status`, `cancel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwarmRunDir {
    home: KestrelHome,
    run: String,
    path: PathBuf,
}

impl SwarmRunDir {
    /// Creates `swarm/<run_id>/` (0700) with `graph_text` as its `graph.toml` (0600,
    /// written and synced before anything else exists in it), then `logs/`. The text is
    /// kept as given (comments too); it must read as a graph, but a GOAL run's graph may
    /// have no tasks yet, so its problems are the caller's to check ([`parse_graph`]).
    ///
    /// Fails when the id is not valid, a run with this id exists, the text is not a
    /// graph ([`StoreError::Graph`]) or a directory or file cannot be created.
    pub fn create(
        home: &KestrelHome,
        run_id: &str,
        graph_text: &str,
    ) -> Result<SwarmRunDir, StoreError> {
        validate_run_id(run_id)?;
        let run = SwarmRunDir::at(home, run_id);
        graph::read_graph(graph_text)
            .map_err(|source| StoreError::Graph { path: run.graph_file(), source })?;
        paths::ensure_dir(&home.swarm_dir())?;
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&run.path) {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                return Err(StoreError::RunExists { run: run.run, path: run.path });
            }
            Err(source) => {
                return Err(StoreError::io("create the run directory", run.path, source));
            }
        }
        let graph_file = run.graph_file();
        let written = paths::private_file_options()
            .write(true)
            .create_new(true)
            .open(&graph_file)
            .and_then(|mut file| {
                file.write_all(graph_text.as_bytes()).and_then(|()| file.sync_all())
            })
            .map_err(|source| StoreError::io("write the run's graph", &graph_file, source))
            .and_then(|()| paths::ensure_dir(&run.logs_dir()));
        if let Err(error) = written {
            // Best effort: a run without its graph is no run; the error is what matters.
            let _ = std::fs::remove_dir_all(&run.path);
            return Err(error);
        }
        Ok(run)
    }

    /// Opens the run `query` names: its whole id or, failing that, the only run id that
    /// starts with it. Nothing is locked or read.
    ///
    /// Fails with [`StoreError::InvalidRunId`], [`StoreError::RunNotFound`] (naming
    /// `kestrel swarm list`) or [`StoreError::AmbiguousRun`] (listing the candidates).
    pub fn open(home: &KestrelHome, query: &str) -> Result<SwarmRunDir, StoreError> {
        validate_run_id(query)?;
        let exact = SwarmRunDir::at(home, query);
        if exact.path.is_dir() {
            return Ok(exact);
        }
        let mut matching: Vec<String> =
            run_ids(home)?.into_iter().filter(|id| id.starts_with(query)).collect();
        match matching.len() {
            0 => Err(StoreError::RunNotFound { query: query.to_owned() }),
            1 => Ok(SwarmRunDir::at(home, &matching.remove(0))),
            count => {
                matching.sort();
                let mut candidates: Vec<String> =
                    matching.into_iter().take(MAX_CANDIDATES).collect();
                if count > MAX_CANDIDATES {
                    candidates.push(format!("and {} more", count - MAX_CANDIDATES));
                }
                Err(StoreError::AmbiguousRun { query: query.to_owned(), candidates })
            }
        }
    }

    fn at(home: &KestrelHome, run: &str) -> SwarmRunDir {
        SwarmRunDir { home: home.clone(), run: run.to_owned(), path: home.swarm_run_dir(run) }
    }

    /// The run's id (whole, also when opened by a prefix).
    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// `swarm/<run>/`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `logs/`: what verifications and role turns printed (head and tail).
    pub fn logs_dir(&self) -> PathBuf {
        self.path.join("logs")
    }

    /// `graph.toml`.
    pub fn graph_file(&self) -> PathBuf {
        self.path.join("graph.toml")
    }

    /// `events.jsonl`.
    pub fn events_file(&self) -> PathBuf {
        self.path.join("events.jsonl")
    }

    /// `lock`: held by the orchestrator running the run, with its pid inside.
    pub fn lock_file(&self) -> PathBuf {
        self.path.join("lock")
    }

    /// The run's graph as stored (not checked for problems: a GOAL run's graph has no
    /// tasks before its plan).
    ///
    /// Fails when `graph.toml` cannot be read or is not a graph.
    pub fn graph(&self) -> Result<SwarmGraph, StoreError> {
        let path = self.graph_file();
        let text = std::fs::read_to_string(&path)
            .map_err(|source| StoreError::io("read the run's graph", &path, source))?;
        graph::read_graph(&text).map_err(|source| StoreError::Graph { path, source })
    }

    /// Replaces `graph.toml` with `graph` (the planner's, in GOAL runs): written to a
    /// temporary file, synced and renamed over it, so a reader never sees half of it.
    ///
    /// Fails when the graph has problems ([`StoreError::Graph`]: a stored graph is one
    /// that can run) or cannot be written.
    pub fn write_graph(&self, graph: &SwarmGraph) -> Result<(), StoreError> {
        let path = self.graph_file();
        let problems = graph.problems();
        if !problems.is_empty() {
            return Err(StoreError::Graph { path, source: GraphError::Problems { problems } });
        }
        let text = graph::graph_to_toml(graph).map_err(|message| StoreError::EncodeRun {
            run: self.run.clone(),
            what: "graph",
            message,
        })?;
        paths::replace_file(&path, text.as_bytes())
            .map_err(|source| StoreError::io("replace the run's graph", &path, source))
    }
}

/// Run ids name directories: 1 to 128 of letters, digits, `-` and `_`.
fn validate_run_id(id: &str) -> Result<(), StoreError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_');
    if id.is_empty() || id.len() > MAX_RUN_ID_LEN || !id.chars().all(allowed) {
        return Err(StoreError::InvalidRunId { id: id.to_owned() });
    }
    Ok(())
}

/// The ids of every run directory under `swarm/` (other entries are left out).
fn run_ids(home: &KestrelHome) -> Result<Vec<String>, StoreError> {
    let dir = home.swarm_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::io("list", dir, source)),
    };
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::io("list", &dir, source))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if validate_run_id(&name).is_ok() && entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            ids.push(name);
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests;
