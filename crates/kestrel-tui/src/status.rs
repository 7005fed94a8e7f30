//! The status line: model, mode, context used, tokens and cost of the session, and the
//! state of the daemon link and the worker.

use crate::theme;
use crate::wrap;
use ratatui::text::{Line, Span};

/// How far the connection to the daemon and the session's worker have come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// Looking for (or starting) the daemon.
    Connecting,
    /// Connected; no session yet (its worker starts with the first prompt).
    Connected,
    /// `session/new` or `session/load` sent; the worker is starting.
    Opening,
    /// The session is open and idle.
    Ready,
    /// A turn is running.
    Working,
    /// The daemon could not be reached, or went away.
    Lost(String),
}

/// What the status line shows.
#[derive(Debug, Clone)]
pub(crate) struct Status {
    pub(crate) model: Option<String>,
    pub(crate) mode: Option<String>,
    /// Context the last model request filled, and the window.
    pub(crate) context_used: u64,
    pub(crate) context_size: u64,
    /// Tokens of every model request of this session seen here.
    pub(crate) tokens: u64,
    pub(crate) cost: Option<f64>,
    pub(crate) link: LinkState,
    pub(crate) restarts: u32,
    /// A one-off hint (e.g. "press ctrl+c again to quit") instead of the usual line.
    pub(crate) hint: Option<String>,
}

impl Status {
    pub(crate) fn new() -> Self {
        Self {
            model: None,
            mode: None,
            context_used: 0,
            context_size: 0,
            tokens: 0,
            cost: None,
            link: LinkState::Connecting,
            restarts: 0,
            hint: None,
        }
    }

    /// Forgets the usage of the previous session.
    pub(crate) fn reset_usage(&mut self) {
        self.context_used = 0;
        self.context_size = 0;
        self.tokens = 0;
        self.cost = None;
        self.restarts = 0;
    }

    pub(crate) fn link_text(&self) -> (String, ratatui::style::Style) {
        match &self.link {
            LinkState::Connecting => ("○ starting daemon".into(), theme::dim()),
            LinkState::Connected => ("● daemon ready".into(), theme::dim()),
            LinkState::Opening => ("◐ starting worker".into(), theme::warning()),
            LinkState::Ready if self.restarts > 0 => {
                (format!("● ready · worker restarted ×{}", self.restarts), theme::warning())
            }
            LinkState::Ready => ("● ready".into(), theme::success()),
            LinkState::Working => ("● working".into(), theme::accent()),
            LinkState::Lost(_) => ("✗ daemon unreachable".into(), theme::error()),
        }
    }

    pub(crate) fn context_text(&self) -> Option<String> {
        if self.context_size == 0 {
            return None;
        }
        let percent = self.context_used.saturating_mul(100) / self.context_size.max(1);
        Some(format!("ctx {percent}%"))
    }

    pub(crate) fn line(&self, width: usize) -> Line<'static> {
        if let Some(hint) = &self.hint {
            return Line::from(Span::styled(format!(" {hint}"), theme::warning()));
        }
        let mut left: Vec<String> = Vec::new();
        left.push(self.model.clone().unwrap_or_else(|| "model: config default".to_owned()));
        left.push(self.mode.clone().unwrap_or_else(|| "ask".to_owned()));
        if let Some(context) = self.context_text() {
            left.push(context);
        }
        if self.tokens > 0 {
            left.push(format!("{} tok", compact(self.tokens)));
        }
        if let Some(cost) = self.cost {
            left.push(format!("${cost:.2}"));
        }
        let left = format!(" {}", left.join(" · "));
        let (right, right_style) = self.link_text();
        // The link state stays visible; the left part gives way on narrow terminals.
        let room = width.saturating_sub(wrap::width(&right) + 1);
        let mut spans = wrap::truncate_spans(vec![Span::styled(left, theme::dim())], room);
        let gap = width.saturating_sub(wrap::spans_width(&spans) + wrap::width(&right));
        spans.push(Span::raw(" ".repeat(gap)));
        spans.push(Span::styled(right, right_style));
        Line::from(wrap::truncate_spans(spans, width))
    }
}

/// `1234` as `1.2k`, `1234567` as `1.2M`.
pub(crate) fn compact(count: u64) -> String {
    match count {
        0..1_000 => count.to_string(),
        1_000..1_000_000 => format!("{:.1}k", count as f64 / 1_000.0),
        _ => format!("{:.1}M", count as f64 / 1_000_000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(line: &Line<'_>) -> String {
        line.spans.iter().map(|span| span.content.as_ref()).collect()
    }

    #[test]
    fn the_line_shows_model_mode_usage_and_link_state() {
        let mut status = Status::new();
        status.model = Some("p/m".into());
        status.mode = Some("auto".into());
        status.context_used = 50_000;
        status.context_size = 200_000;
        status.tokens = 61_234;
        status.cost = Some(0.125);
        status.link = LinkState::Ready;
        let line = text(&status.line(80));
        assert!(line.starts_with(" p/m · auto · ctx 25% · 61.2k tok · $0.12"), "{line}");
        assert!(line.ends_with("● ready"), "{line}");
        status.restarts = 1;
        assert!(text(&status.line(80)).ends_with("worker restarted ×1"));
        status.restarts = 0;
        let narrow = text(&status.line(30));
        assert!(narrow.ends_with("● ready") && narrow.contains('…'), "{narrow}");
        assert_eq!(wrap::width(&narrow), 30);
    }
}
