//! Syntax highlighting of code blocks with syntect, loaded lazily: the syntax and theme
//! dumps take tens of milliseconds and megabytes to load, so nothing is loaded until the
//! first code block asks, and then on a background thread. Until it is ready code shows
//! plain; when it becomes ready the epoch changes and cached renders are redone.

use crate::theme;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

struct Loaded {
    syntaxes: SyntaxSet,
    theme: Theme,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();
static LOADING: AtomicBool = AtomicBool::new(false);
static EPOCH: AtomicU64 = AtomicU64::new(0);
static NOTIFY: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Changes once, when highlighting becomes available: renders cached under another epoch
/// are stale.
pub(crate) fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// Sets what to call (from the loading thread) once highlighting is ready, so the UI can
/// redraw. Only the first call has an effect.
pub(crate) fn on_ready(notify: impl Fn() + Send + Sync + 'static) {
    let _ = NOTIFY.set(Box::new(notify));
}

fn start_loading() {
    if LOADING.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new().name("kestrel-syntect".into()).spawn(|| {
        let syntaxes = SyntaxSet::load_defaults_newlines();
        let mut themes = ThemeSet::load_defaults();
        let Some(theme) = themes.themes.remove("base16-ocean.dark") else {
            return;
        };
        if LOADED.set(Loaded { syntaxes, theme }).is_ok() {
            EPOCH.fetch_add(1, Ordering::AcqRel);
            if let Some(notify) = NOTIFY.get() {
                notify();
            }
        }
    });
    if spawned.is_err() {
        LOADING.store(false, Ordering::Release);
    }
}

/// The code's lines as styled spans, or `None` while highlighting is not loaded yet (the
/// first call starts loading it) or the language is unknown.
pub(crate) fn highlight(language: &str, code: &str) -> Option<Vec<Vec<Span<'static>>>> {
    let Some(loaded) = LOADED.get() else {
        if !language.is_empty() {
            start_loading();
        }
        return None;
    };
    let token = language.split([',', ' ']).next().unwrap_or_default();
    let syntax = loaded
        .syntaxes
        .find_syntax_by_token(token)
        .or_else(|| loaded.syntaxes.find_syntax_by_extension(token))?;
    let mut highlighter = HighlightLines::new(syntax, &loaded.theme);
    let mut lines = Vec::new();
    for line in syntect::util::LinesWithEndings::from(code) {
        let regions = highlighter.highlight_line(line, &loaded.syntaxes).ok()?;
        let spans = regions
            .into_iter()
            .filter_map(|(style, text)| {
                let text = text.trim_end_matches(['\n', '\r']);
                if text.is_empty() {
                    return None;
                }
                let color = style.foreground;
                let mut ratatui_style = Style::default().fg(theme::rgb(color.r, color.g, color.b));
                if style.font_style.contains(FontStyle::BOLD) {
                    ratatui_style = ratatui_style.add_modifier(Modifier::BOLD);
                }
                if style.font_style.contains(FontStyle::ITALIC) {
                    ratatui_style = ratatui_style.add_modifier(Modifier::ITALIC);
                }
                Some(Span::styled(text.to_owned(), ratatui_style))
            })
            .collect();
        lines.push(spans);
    }
    Some(lines)
}
