//! `/swarm`: the swarm runs' tasks, live (ARCHITECTURE §10). The run directories are
//! read through the store off the UI task, about once a second while the view is open
//! (one read at a time; nothing runs once it is closed). Enter opens a task's role
//! session (the live one, else its last) the way the session picker does. Drawing is
//! in `swarm_table`.

use crate::app::App;
use crate::cell::NoticeLevel;
use crate::event::AppEvent;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use kestrel_protocol::swarm::{SwarmEvent, TaskState};
use kestrel_store::{KestrelHome, RunStatus, RunSummary, SessionIndex, SwarmRunDir, TaskStatus};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// How often the open view reads the run again.
const REFRESH: Duration = Duration::from_secs(1);
/// The run list (every run's events) is read again every this many reads: a run
/// started meanwhile shows up, without reading every run each second.
const LIST_EVERY: u32 = 5;

/// Tells views apart, so a late answer to a closed view is dropped.
static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// What a background read of the view brought back.
#[derive(Debug)]
pub(crate) enum SwarmUpdate {
    /// A read finished: the run list (when asked) and the status of `shown`, which is
    /// `asked` or, when that is none or gone, the newest run.
    Read {
        serial: u64,
        asked: Option<String>,
        runs: Option<Result<Vec<RunSummary>, String>>,
        shown: Option<String>,
        status: Option<Result<RunStatus, String>>,
    },
    /// Time to read again.
    Tick { serial: u64 },
    /// The session to open for a task (its id and directory), or why there is none.
    SessionFound { serial: u64, result: Result<(String, PathBuf), String> },
}

/// What a key did to the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SwarmAction {
    None,
    Closed,
    /// Another run was chosen: read it now.
    SwitchedRun,
    /// Enter on a task: its live session, if the status names one.
    Open {
        task: String,
        live: Option<String>,
    },
}

/// The open `/swarm` view.
#[derive(Debug)]
pub(crate) struct SwarmView {
    serial: u64,
    /// Every run, newest first; `None` before the first listing.
    pub(crate) runs: Option<Vec<RunSummary>>,
    /// The run shown (or asked for); `None` until the first read picks the newest.
    pub(crate) run: Option<String>,
    pub(crate) status: Option<RunStatus>,
    /// Why the runs or the run could not be read.
    pub(crate) error: Option<String>,
    /// The selected task, by id: rows move as tasks change state.
    selected: Option<String>,
    /// A line said in place of the keys hint (an Enter that found no session).
    pub(crate) note: Option<String>,
    reading: bool,
    reads: u32,
    /// Cleared when the view closes: its ticker stops.
    alive: Arc<AtomicBool>,
}

impl Drop for SwarmView {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Relaxed);
    }
}

impl SwarmView {
    fn new() -> SwarmView {
        SwarmView {
            serial: NEXT_SERIAL.fetch_add(1, Ordering::Relaxed),
            runs: None,
            run: None,
            status: None,
            error: None,
            selected: None,
            note: None,
            reading: false,
            reads: 0,
            alive: Arc::new(AtomicBool::new(true)),
        }
    }

    /// A view showing `status` (tests: no read, no ticker).
    #[cfg(test)]
    pub(crate) fn showing(runs: Vec<RunSummary>, status: RunStatus) -> SwarmView {
        let mut view = SwarmView::new();
        view.run = Some(status.run.clone());
        view.runs = Some(runs);
        view.status = Some(status);
        view
    }

    /// The tasks in display order: those waiting for a person first, then the graph's.
    pub(crate) fn rows(&self) -> Vec<&TaskStatus> {
        let Some(status) = &self.status else { return Vec::new() };
        let mut rows: Vec<&TaskStatus> = status.tasks.iter().collect();
        rows.sort_by_key(|task| task.state != TaskState::NeedsInput);
        rows
    }

    /// The selected row's index (the first row when the selected task is gone).
    pub(crate) fn selected_row(&self) -> usize {
        let rows = self.rows();
        self.selected
            .as_ref()
            .and_then(|id| rows.iter().position(|task| &task.id == id))
            .unwrap_or(0)
    }

    /// The shown run's place in the list (0-based) and the number of runs.
    pub(crate) fn run_position(&self) -> Option<(usize, usize)> {
        let runs = self.runs.as_ref()?;
        let run = self.run.as_ref()?;
        let index = runs.iter().position(|summary| &summary.run == run)?;
        Some((index, runs.len()))
    }

    /// The shown run's summary from the list (its goal).
    pub(crate) fn summary(&self) -> Option<&RunSummary> {
        let run = self.run.as_ref()?;
        self.runs.as_ref()?.iter().find(|summary| &summary.run == run)
    }

    pub(crate) fn handle_key(&mut self, key: KeyEvent) -> SwarmAction {
        self.note = None;
        let rows = self.rows().len();
        let row = self.selected_row();
        let target = match key.code {
            KeyCode::Esc => return SwarmAction::Closed,
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                return SwarmAction::Closed;
            }
            KeyCode::Up => row.saturating_sub(1),
            KeyCode::Down => (row + 1).min(rows.saturating_sub(1)),
            KeyCode::PageUp => row.saturating_sub(10),
            KeyCode::PageDown => (row + 10).min(rows.saturating_sub(1)),
            KeyCode::Home => 0,
            KeyCode::End => rows.saturating_sub(1),
            KeyCode::Left | KeyCode::BackTab => return self.switch_run(false),
            KeyCode::Right | KeyCode::Tab => return self.switch_run(true),
            KeyCode::Enter => {
                let rows = self.rows();
                let Some(task) = rows.get(row) else { return SwarmAction::None };
                let live = task.session.as_ref().map(|session| session.as_str().to_owned());
                return SwarmAction::Open { task: task.id.clone(), live };
            }
            _ => return SwarmAction::None,
        };
        self.selected = self.rows().get(target).map(|task| task.id.clone());
        SwarmAction::None
    }

    /// Shows the next older run (`forward`) or the next newer one, wrapping.
    fn switch_run(&mut self, forward: bool) -> SwarmAction {
        let Some((index, count)) = self.run_position() else { return SwarmAction::None };
        if count < 2 {
            return SwarmAction::None;
        }
        let next = if forward { (index + 1) % count } else { (index + count - 1) % count };
        let Some(run) = self.runs.as_ref().and_then(|runs| runs.get(next)) else {
            return SwarmAction::None;
        };
        self.run = Some(run.run.clone());
        self.status = None;
        self.error = None;
        self.selected = None;
        SwarmAction::SwitchedRun
    }
}

impl App {
    /// `/swarm`: opens the view and its first read; a ticker asks for a read every
    /// [`REFRESH`] until the view closes.
    pub(crate) fn open_swarm(&mut self) {
        self.picker = None;
        let view = SwarmView::new();
        let (serial, alive, events) = (view.serial, view.alive.clone(), self.events.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REFRESH).await;
                if !alive.load(Ordering::Relaxed) {
                    return;
                }
                if events.send(AppEvent::Swarm(SwarmUpdate::Tick { serial })).await.is_err() {
                    return;
                }
            }
        });
        self.swarm = Some(view);
        self.read_swarm();
    }

    /// Starts a read of the view's run (and of the run list when due), unless one runs.
    fn read_swarm(&mut self) {
        let Some(view) = &mut self.swarm else { return };
        if view.reading {
            return;
        }
        view.reading = true;
        // With no run shown there is nothing else to read: list every time.
        let list = view.runs.is_none() || view.run.is_none() || view.reads % LIST_EVERY == 0;
        view.reads += 1;
        let (serial, asked) = (view.serial, view.run.clone());
        let (home, events) = (self.home.clone(), self.events.clone());
        tokio::task::spawn_blocking(move || {
            let update = read(&home, serial, asked, list);
            let _ = events.blocking_send(AppEvent::Swarm(update));
        });
    }

    pub(crate) fn swarm_update(&mut self, update: SwarmUpdate) {
        let Some(view) = &mut self.swarm else { return };
        match update {
            SwarmUpdate::Tick { serial } if serial == view.serial => self.read_swarm(),
            SwarmUpdate::Read { serial, asked, runs, shown, status } if serial == view.serial => {
                view.reading = false;
                match runs {
                    Some(Ok(runs)) => view.runs = Some(runs),
                    Some(Err(message)) => view.error = Some(message),
                    None => {}
                }
                if asked != view.run {
                    // Another run was chosen while this one was read.
                    return self.read_swarm();
                }
                view.run = shown;
                match status {
                    Some(Ok(status)) => {
                        view.status = Some(status);
                        view.error = None;
                    }
                    Some(Err(message)) => view.error = Some(message),
                    None => view.status = None,
                }
            }
            SwarmUpdate::SessionFound { serial, result } if serial == view.serial => match result {
                Ok((id, cwd)) => {
                    self.swarm = None;
                    if self.session_id() == Some(id.as_str()) {
                        return self.notice(NoticeLevel::Info, "that session is the one open");
                    }
                    self.switch_to_session(id, cwd);
                }
                Err(message) => view.note = Some(message),
            },
            SwarmUpdate::Tick { .. }
            | SwarmUpdate::Read { .. }
            | SwarmUpdate::SessionFound { .. } => {}
        }
    }

    /// A key for the open view.
    pub(crate) fn swarm_key(&mut self, key: KeyEvent) {
        let Some(view) = &mut self.swarm else { return };
        match view.handle_key(key) {
            SwarmAction::None => {}
            SwarmAction::Closed => self.swarm = None,
            SwarmAction::SwitchedRun => self.read_swarm(),
            SwarmAction::Open { task, live } => {
                let Some(run) = view.run.clone() else { return };
                view.note = Some(format!("opening the session of {task}…"));
                let (serial, home, events) = (view.serial, self.home.clone(), self.events.clone());
                tokio::task::spawn_blocking(move || {
                    let result = task_session(&home, &run, &task, live);
                    let _ = events.blocking_send(AppEvent::Swarm(SwarmUpdate::SessionFound {
                        serial,
                        result,
                    }));
                });
            }
        }
    }
}

/// One read for the view (blocking: the store reads files).
fn read(home: &KestrelHome, serial: u64, asked: Option<String>, list: bool) -> SwarmUpdate {
    let runs = list.then(|| kestrel_store::list_runs(home).map_err(|error| error.to_string()));
    let listed = match &runs {
        Some(Ok(runs)) => Some(runs.as_slice()),
        Some(Err(_)) | None => None,
    };
    // The run asked for, unless a fresh listing says it is gone; else the newest.
    let gone = |run: &String| listed.is_some_and(|runs| !runs.iter().any(|s| &s.run == run));
    let shown = match (&asked, listed) {
        (Some(run), _) if !gone(run) => Some(run.clone()),
        (_, Some(runs)) => runs.first().map(|summary| summary.run.clone()),
        (_, None) => None,
    };
    let status = shown.as_ref().map(|run| {
        SwarmRunDir::open(home, run).and_then(|dir| dir.status()).map_err(|error| error.to_string())
    });
    SwarmUpdate::Read { serial, asked, runs, shown, status }
}

/// The session Enter opens for `task` of `run`: `live` (the one whose turn runs), else
/// the task's last role session (the last `turn_started` of it), with the directory the
/// session index gives it (the worktree of the task's last attempt when the index does
/// not know it). Blocking.
pub(crate) fn task_session(
    home: &KestrelHome,
    run: &str,
    task: &str,
    live: Option<String>,
) -> Result<(String, PathBuf), String> {
    let dir = SwarmRunDir::open(home, run).map_err(|error| error.to_string())?;
    let log = dir.events().map_err(|error| error.to_string())?;
    let mut last = None;
    let mut worktree = None;
    for entry in log.entries.iter().rev() {
        if let SwarmEvent::TurnStarted { task: of, session, .. } = &entry.event
            && of == task
            && last.is_none()
        {
            last = Some(session.as_str().to_owned());
        }
        if let SwarmEvent::AttemptStarted { task: of, worktree: path, .. } = &entry.event
            && of == task
            && worktree.is_none()
        {
            worktree = Some(PathBuf::from(path));
        }
    }
    let Some(session) = live.or(last) else {
        return Err(format!("{task} has no role session yet"));
    };
    match (SessionIndex::find(home, &session), worktree) {
        (Ok(summary), _) => Ok((session, PathBuf::from(summary.cwd))),
        (Err(_), Some(worktree)) => Ok((session, worktree)),
        (Err(error), None) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests;
