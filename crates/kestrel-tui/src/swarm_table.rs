//! Draws the `/swarm` view: a box over the bottom of the transcript (like the pickers)
//! with the run's state, branch and cost, a line naming the tasks that wait for a
//! person, and the table `kestrel swarm status` prints, narrowed to the terminal:
//! columns are as wide as their widest cell, and the least needed go first when the
//! terminal is narrow.

use crate::status::compact;
use crate::swarm_view::SwarmView;
use crate::theme;
use crate::tool_cell::short_id;
use crate::wrap::truncate_spans;
use kestrel_protocol::swarm::{RunState, TaskState};
use kestrel_store::{RunStatus, TaskStatus};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Widget};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// The pointer and the needs-input mark before each row.
const PREFIX: usize = 4;
const GAP: &str = "  ";
/// The narrowest a model name is cut to before columns are left out.
const MODEL_MIN: usize = 12;
/// Said when there is no run to show.
pub(crate) const NO_RUNS: &str = "no swarm runs yet: kestrel swarm run GOAL (or --graph FILE)";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Task,
    State,
    Attempt,
    Session,
    Model,
    Tokens,
    Cost,
    Time,
}

const COLUMNS: [Column; 8] = [
    Column::Task,
    Column::State,
    Column::Attempt,
    Column::Session,
    Column::Model,
    Column::Tokens,
    Column::Cost,
    Column::Time,
];

/// Left out, in this order, when the terminal is too narrow for every column.
const NARROW: [Column; 4] = [Column::Session, Column::Model, Column::Tokens, Column::Attempt];

impl Column {
    fn title(self) -> &'static str {
        match self {
            Column::Task => "TASK",
            Column::State => "STATE",
            Column::Attempt => "ATTEMPT",
            Column::Session => "SESSION",
            Column::Model => "MODEL",
            Column::Tokens => "TOKENS IN/OUT",
            Column::Cost => "COST",
            Column::Time => "TIME",
        }
    }

    fn right_aligned(self) -> bool {
        match self {
            Column::Attempt | Column::Tokens | Column::Cost | Column::Time => true,
            Column::Task | Column::State | Column::Session | Column::Model => false,
        }
    }

    /// The widest a cell may be (longer ones are cut with `…`).
    fn cap(self) -> usize {
        match self {
            Column::Task => 24,
            Column::Model => 28,
            Column::State
            | Column::Attempt
            | Column::Session
            | Column::Tokens
            | Column::Cost
            | Column::Time => usize::MAX,
        }
    }

    fn cell(self, task: &TaskStatus) -> String {
        match self {
            Column::Task => task.id.clone(),
            Column::State => task.state.as_str().to_owned(),
            Column::Attempt => task.attempts.to_string(),
            // The last 12 characters, as subagents are shown (`kestrel resume` takes them).
            Column::Session => task.session.as_ref().map_or("-".into(), |s| short_id(s.as_str())),
            Column::Model => task.model.clone().unwrap_or_else(|| "-".into()),
            Column::Tokens => {
                format!("{}/{}", compact(task.tokens.input), compact(task.tokens.output))
            }
            Column::Cost => format!("${:.4}", task.cost_usd),
            Column::Time => elapsed(task.elapsed_s),
        }
    }
}

/// `45s`, `3m05s`, `2h03m`.
fn elapsed(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3600, seconds % 3600 / 60),
    }
}

fn task_state_style(state: TaskState) -> Style {
    match state {
        TaskState::NeedsInput => theme::warning().add_modifier(Modifier::BOLD),
        TaskState::Merged => theme::success(),
        TaskState::Failed | TaskState::Blocked => theme::error(),
        TaskState::Implementing
        | TaskState::Reviewing
        | TaskState::Verifying
        | TaskState::Merging => theme::accent(),
        TaskState::Waiting | TaskState::Ready | TaskState::Cancelled => theme::dim(),
    }
}

fn run_state_style(state: RunState) -> Style {
    match state {
        RunState::Running => theme::accent(),
        RunState::Done => theme::success(),
        RunState::Failed => theme::error(),
        RunState::Interrupted | RunState::Budget => theme::warning(),
        RunState::Cancelled => theme::dim(),
    }
}

/// The columns that fit `width` and how wide each is.
fn layout(tasks: &[&TaskStatus], width: usize) -> Vec<(Column, usize)> {
    let mut columns: Vec<(Column, usize)> = COLUMNS
        .iter()
        .map(|column| {
            let widest = tasks.iter().map(|task| column.cell(task).width()).max().unwrap_or(0);
            (*column, widest.max(column.title().width()).min(column.cap()))
        })
        .collect();
    // The model's name may be cut down to MODEL_MIN: whole columns go only when that
    // is not enough; then the model gets what room is left.
    let total = |columns: &[(Column, usize)], cut_model: bool| {
        let widths = columns.iter().map(|(column, width)| {
            if cut_model && *column == Column::Model { (*width).min(MODEL_MIN) } else { *width }
        });
        PREFIX + widths.sum::<usize>() + GAP.len() * columns.len().saturating_sub(1)
    };
    for dropped in NARROW {
        if total(&columns, true) <= width {
            break;
        }
        columns.retain(|(column, _)| *column != dropped);
    }
    let over = total(&columns, false).saturating_sub(width);
    for (column, column_width) in &mut columns {
        if *column == Column::Model {
            *column_width = column_width.saturating_sub(over).max(MODEL_MIN.min(*column_width));
        }
    }
    columns
}

/// `text` cut to `width` columns (`…` marks a cut) and padded to it.
fn fit(text: &str, width: usize, right: bool) -> String {
    let mut text = text.to_owned();
    if text.width() > width {
        let mut cut = String::new();
        let mut used = 0;
        for ch in text.chars() {
            let ch_width = ch.width().unwrap_or(0);
            if used + ch_width + 1 > width {
                break;
            }
            used += ch_width;
            cut.push(ch);
        }
        text = cut + "…";
    }
    let pad = " ".repeat(width.saturating_sub(text.width()));
    if right { pad + &text } else { text + &pad }
}

fn header(columns: &[(Column, usize)]) -> Line<'static> {
    let cells: Vec<String> = columns
        .iter()
        .map(|(column, width)| fit(column.title(), *width, column.right_aligned()))
        .collect();
    Line::from(Span::styled(format!("{}{}", " ".repeat(PREFIX), cells.join(GAP)), theme::dim()))
}

fn row(task: &TaskStatus, columns: &[(Column, usize)], selected: bool) -> Line<'static> {
    let waits = task.state == TaskState::NeedsInput;
    let mut spans = vec![
        Span::styled(if selected { "› " } else { "  " }, theme::selected()),
        Span::styled(if waits { "! " } else { "  " }, task_state_style(TaskState::NeedsInput)),
    ];
    for (index, (column, width)) in columns.iter().enumerate() {
        if index > 0 {
            spans.push(Span::raw(GAP));
        }
        let text = fit(&column.cell(task), *width, column.right_aligned());
        let style = match column {
            Column::Task if selected => theme::selected(),
            Column::Task if waits => theme::bold(),
            Column::State => task_state_style(task.state),
            Column::Session if task.session.is_none() => theme::dim(),
            Column::Task
            | Column::Attempt
            | Column::Session
            | Column::Model
            | Column::Tokens
            | Column::Cost
            | Column::Time => Style::default(),
        };
        spans.push(Span::styled(text, style));
    }
    Line::from(spans)
}

/// The run's state, branch, cost and goal.
fn summary(status: &RunStatus, goal: Option<&str>) -> Line<'static> {
    let mut spans = vec![
        Span::styled(status.state.as_str(), run_state_style(status.state)),
        Span::styled(" · ", theme::dim()),
        Span::raw(status.branch.clone().unwrap_or_else(|| "no branch yet".into())),
        Span::styled(" · ", theme::dim()),
        Span::styled(format!("${:.4}", status.cost_usd), theme::bold()),
    ];
    if let Some(goal) = goal.and_then(|goal| goal.lines().next()) {
        spans.push(Span::styled(format!(" · {goal}"), theme::dim()));
    }
    Line::from(spans)
}

/// The tasks waiting for a person, named, and how to answer them.
fn needs_input(tasks: &[&TaskStatus]) -> Option<Line<'static>> {
    let waiting: Vec<&str> = tasks
        .iter()
        .filter(|task| task.state == TaskState::NeedsInput)
        .map(|task| task.id.as_str())
        .collect();
    let text = match waiting.len() {
        0 => return None,
        1 => format!("! {} needs input: enter opens its session to answer", waiting.join(", ")),
        count => format!(
            "! {count} tasks need input ({}): enter opens a task's session to answer",
            waiting.join(", ")
        ),
    };
    Some(Line::from(Span::styled(text, task_state_style(TaskState::NeedsInput))))
}

/// The view's lines above the hint, for `rows` rows of `width` columns.
pub(crate) fn body(view: &SwarmView, width: usize, rows: usize) -> Vec<Line<'static>> {
    let Some(status) = &view.status else {
        let line = match (&view.error, &view.runs) {
            (Some(error), _) => Span::styled(error.clone(), theme::error()),
            (None, Some(runs)) if runs.is_empty() => Span::raw(NO_RUNS),
            (None, Some(_) | None) => Span::styled("reading the swarm runs…", theme::dim()),
        };
        return vec![Line::from(line)];
    };
    let tasks = view.rows();
    let goal = view.summary().and_then(|summary| summary.goal.as_deref());
    let mut lines = vec![summary(status, goal)];
    lines.extend(needs_input(&tasks));
    if tasks.is_empty() {
        lines.push(Line::from(Span::styled("no tasks yet (the planner is at work)", theme::dim())));
        return lines;
    }
    let columns = layout(&tasks, width);
    lines.push(header(&columns));
    let room = rows.saturating_sub(lines.len()).max(1);
    let selected = view.selected_row();
    let first = selected.saturating_sub(room - 1);
    for (index, task) in tasks.iter().enumerate().skip(first).take(room) {
        lines.push(row(task, &columns, index == selected));
    }
    lines
}

/// Rows the view wants: its border, lines and hint.
pub(crate) fn height(view: &SwarmView) -> u16 {
    let lines = match &view.status {
        None => 1,
        Some(_) => {
            let tasks = view.rows();
            let waiting = usize::from(tasks.iter().any(|t| t.state == TaskState::NeedsInput));
            2 + waiting + tasks.len().max(1)
        }
    };
    u16::try_from(lines + 3).unwrap_or(u16::MAX)
}

fn hint(view: &SwarmView) -> Span<'static> {
    if let Some(note) = &view.note {
        return Span::styled(note.clone(), theme::warning());
    }
    if let (Some(error), Some(_)) = (&view.error, &view.status) {
        return Span::styled(format!("not refreshed: {error}"), theme::error());
    }
    let runs = match view.run_position() {
        Some((_, count)) if count > 1 => " · ←→ other runs",
        Some(_) | None => "",
    };
    Span::styled(format!("↑↓ select · enter open its session{runs} · esc close"), theme::dim())
}

fn title(view: &SwarmView) -> String {
    match (&view.run, view.run_position()) {
        (Some(run), Some((index, count))) if count > 1 => {
            format!(" Swarm · run {run} ({} of {count}) ", index + 1)
        }
        (Some(run), _) => format!(" Swarm · run {run} "),
        (None, _) => " Swarm ".to_owned(),
    }
}

pub(crate) fn draw(view: &SwarmView, area: Rect, buffer: &mut Buffer) {
    Clear.render(area, buffer);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme::accent())
        .title(Span::styled(title(view), theme::bold()));
    let inner = block.inner(area);
    block.render(area, buffer);
    if inner.height == 0 {
        return;
    }
    let width = usize::from(inner.width);
    let rows = usize::from(inner.height - 1);
    let line_at = |line: Line<'static>, y: u16, buffer: &mut Buffer| {
        Line::from(truncate_spans(line.spans, width))
            .render(Rect { x: inner.x, y, width: inner.width, height: 1 }, buffer);
    };
    for (offset, line) in body(view, width, rows).into_iter().take(rows).enumerate() {
        line_at(line, inner.y + u16::try_from(offset).unwrap_or(0), buffer);
    }
    line_at(Line::from(hint(view)), inner.y + inner.height - 1, buffer);
}

#[cfg(test)]
mod tests;
