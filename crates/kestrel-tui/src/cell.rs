//! The transcript's cells: what the user sent, what the agent answered (markdown),
//! its reasoning, tool calls, plans, notices, and output of local commands.

use crate::markdown::{self, MarkdownText};
use crate::theme;
use crate::tool_cell::ToolCell;
use crate::wrap::wrap_spans;
use kestrel_protocol::acp;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use std::path::Path;

/// Reasoning lines shown unless output is expanded (the latest ones).
const COLLAPSED_THOUGHT: usize = 3;

/// How serious a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoticeLevel {
    Info,
    Warning,
    Error,
}

/// The body of an informational cell (help, status, command output).
#[derive(Debug, Clone)]
pub(crate) enum InfoBody {
    /// Already styled lines, wrapped to the width when shown.
    Lines(Vec<Line<'static>>),
    /// Markdown source.
    Markdown(String),
    /// A unified diff, coloured.
    Patch(String),
}

/// One entry of the transcript.
#[derive(Debug, Clone)]
pub(crate) enum Cell {
    User(String),
    Assistant(MarkdownText),
    Thought(String),
    Tool(ToolCell),
    Plan(Vec<acp::PlanEntry>),
    Notice { level: NoticeLevel, text: String },
    Info { title: Option<String>, body: InfoBody },
}

/// What rendering depends on besides the cell.
pub(crate) struct RenderContext<'a> {
    pub(crate) width: usize,
    pub(crate) cwd: &'a Path,
    pub(crate) expanded: bool,
}

impl Cell {
    pub(crate) fn render(&mut self, context: &RenderContext<'_>) -> Vec<Line<'static>> {
        let width = context.width;
        match self {
            Cell::User(text) => {
                let marker = [Span::styled("› ", theme::accent().add_modifier(Modifier::BOLD))];
                let rest = [Span::raw("  ")];
                let style = Style::default().add_modifier(Modifier::BOLD);
                let mut lines = Vec::new();
                for (index, line) in text.lines().enumerate() {
                    let first: &[Span<'static>] = if index == 0 { &marker } else { &rest };
                    lines.extend(wrap_spans(&[Span::styled(line, style)], width, first, &rest));
                }
                if lines.is_empty() {
                    lines.push(Line::from(marker.to_vec()));
                }
                lines
            }
            Cell::Assistant(markdown) => markdown.lines(width),
            Cell::Thought(text) => {
                let style = theme::dim().add_modifier(Modifier::ITALIC);
                let mut lines = Vec::new();
                for line in text.trim().lines() {
                    let spans = [Span::styled(line.to_owned(), style)];
                    lines.extend(wrap_spans(&spans, width, &[], &[]));
                }
                if !context.expanded && lines.len() > COLLAPSED_THOUGHT {
                    let hidden = lines.len() - COLLAPSED_THOUGHT;
                    lines.drain(..hidden);
                }
                let mut out = vec![Line::from(Span::styled("Thinking", theme::dim()))];
                out.extend(lines.into_iter().map(|line| {
                    let mut spans = vec![Span::styled("│ ", theme::dim())];
                    spans.extend(line.spans);
                    Line::from(spans)
                }));
                out
            }
            Cell::Tool(tool) => tool.render(width, context.cwd, context.expanded),
            Cell::Plan(entries) => {
                let mut lines = vec![Line::from(Span::styled("Plan", theme::bold()))];
                for entry in entries.iter() {
                    let (mark, style) = match entry.status {
                        acp::PlanEntryStatus::Completed => {
                            ("☑ ", theme::dim().add_modifier(Modifier::CROSSED_OUT))
                        }
                        acp::PlanEntryStatus::InProgress => ("▶ ", theme::warning()),
                        _ => ("☐ ", Style::default()),
                    };
                    let first = [Span::raw("  "), Span::styled(mark, style)];
                    let spans = [Span::styled(entry.content.clone(), style)];
                    lines.extend(wrap_spans(&spans, width, &first, &[Span::raw("    ")]));
                }
                lines
            }
            Cell::Notice { level, text } => {
                let (mark, style) = match level {
                    NoticeLevel::Info => ("ℹ ", theme::dim()),
                    NoticeLevel::Warning => ("⚠ ", theme::warning()),
                    NoticeLevel::Error => ("✗ ", theme::error()),
                };
                let mut lines = Vec::new();
                for (index, line) in text.lines().enumerate() {
                    let first =
                        if index == 0 { Span::styled(mark, style) } else { Span::raw("  ") };
                    let spans = [Span::styled(line.to_owned(), style)];
                    lines.extend(wrap_spans(&spans, width, &[first], &[Span::raw("  ")]));
                }
                lines
            }
            Cell::Info { title, body } => {
                let mut lines = Vec::new();
                if let Some(title) = title {
                    lines.push(Line::from(Span::styled(title.clone(), theme::bold())));
                }
                match body {
                    InfoBody::Lines(body) => {
                        for line in body.iter() {
                            lines.extend(wrap_spans(&line.spans, width, &[], &[Span::raw("  ")]));
                        }
                    }
                    InfoBody::Markdown(source) => lines.extend(markdown::render(source, width)),
                    InfoBody::Patch(text) => {
                        lines.extend(crate::diff_view::colour_patch(text, width))
                    }
                }
                lines
            }
        }
    }
}
