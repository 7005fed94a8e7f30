//! Syntax highlighting of code blocks with syntect, loaded lazily: the syntax and theme
//! dumps take tens of milliseconds and megabytes to load, so nothing is loaded until the
//! first code block asks, and then on a background thread. Until it is ready code shows
//! plain; when it becomes ready the epoch changes and cached renders are redone.
//!
//! Loaded, the syntaxes and the patterns compiled for each language hold ~2–3 MB, but
//! they are only needed to draw code not drawn yet: rendered lines are cached. So the set
//! is dropped once no code was highlighted for [`KEEP_FOR`] (typically just after a
//! turn's answer is drawn) and loaded again by the next code block, which shows plain for
//! the few milliseconds that takes (bench/RESULTS.md, 2026-11-30). The pages of the
//! binary's read-only data it read (the 0.4 MB dump above all) are released with it.

use crate::theme;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use syntect::easy::HighlightLines;
use syntect::highlighting::{FontStyle, Theme, ThemeSet};
use syntect::parsing::SyntaxSet;

/// How long the loaded set is kept after the last code block it highlighted.
const KEEP_FOR: Duration = Duration::from_millis(500);

struct Loaded {
    syntaxes: SyntaxSet,
    theme: Theme,
}

struct State {
    loaded: Option<Arc<Loaded>>,
    /// A loader thread runs (loading, or keeping the set and dropping it when unused).
    loading: bool,
    /// Code asked for the set while it was being dropped: the loader loads it again.
    wanted: bool,
    last_used: Option<Instant>,
}

static STATE: Mutex<State> =
    Mutex::new(State { loaded: None, loading: false, wanted: false, last_used: None });
static EPOCH: AtomicU64 = AtomicU64::new(0);
static NOTIFY: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Changes each time highlighting becomes available: renders cached under another epoch
/// may hold plain code.
pub(crate) fn epoch() -> u64 {
    EPOCH.load(Ordering::Acquire)
}

/// Sets what to call (from the loading thread) once highlighting is ready, so the UI can
/// redraw. Only the first call has an effect.
pub(crate) fn on_ready(notify: impl Fn() + Send + Sync + 'static) {
    let _ = NOTIFY.set(Box::new(notify));
}

/// The loaded set for one highlight, or `None` after starting to load it.
fn loaded() -> Option<Arc<Loaded>> {
    let mut state = state();
    if let Some(loaded) = &state.loaded {
        let loaded = Arc::clone(loaded);
        state.last_used = Some(Instant::now());
        return Some(loaded);
    }
    state.wanted = true;
    if !state.loading {
        state.loading = true;
        let spawned =
            std::thread::Builder::new().name("kestrel-syntect".into()).spawn(load_and_keep);
        if spawned.is_err() {
            state.loading = false;
        }
    }
    None
}

/// The loader thread: loads the set, then drops it once unused for [`KEEP_FOR`], with
/// what it read of the binary's read-only data (the syntax dump, Oniguruma's tables); and
/// again while code asked for it as it was dropped.
fn load_and_keep() {
    loop {
        let read_only_before = kestrel_platform::ReadOnlyData::resident_now();
        let syntaxes = SyntaxSet::load_defaults_newlines();
        let mut themes = ThemeSet::load_defaults();
        let Some(theme) = themes.themes.remove("base16-ocean.dark") else {
            state().loading = false;
            return;
        };
        drop(themes);
        {
            let mut state = state();
            state.loaded = Some(Arc::new(Loaded { syntaxes, theme }));
            state.wanted = false;
            state.last_used = Some(Instant::now());
        }
        EPOCH.fetch_add(1, Ordering::AcqRel);
        if let Some(notify) = NOTIFY.get() {
            notify();
        }
        keep_while_used();
        kestrel_platform::trim_heap();
        if let Some(before) = read_only_before {
            before.release_added();
        }
        // Still "loading" until here, so no other loader started meanwhile (its note
        // would have counted the dump as resident before it, and kept it for good).
        let mut state = state();
        if !std::mem::take(&mut state.wanted) {
            state.loading = false;
            return;
        }
    }
}

/// Waits until the set was not used for [`KEEP_FOR`], then drops it.
fn keep_while_used() {
    loop {
        std::thread::sleep(KEEP_FOR / 2);
        let mut state = state();
        if state.last_used.is_some_and(|used| used.elapsed() < KEEP_FOR) {
            continue;
        }
        let unused = state.loaded.take();
        drop(state);
        drop(unused);
        return;
    }
}

/// The code's lines as styled spans, or `None` while highlighting is not loaded yet (the
/// first call starts loading it) or the language is unknown.
pub(crate) fn highlight(language: &str, code: &str) -> Option<Vec<Vec<Span<'static>>>> {
    if language.is_empty() {
        return None;
    }
    let loaded = loaded()?;
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

#[cfg(test)]
mod tests {
    use super::{KEEP_FOR, epoch, highlight, state};
    use std::time::{Duration, Instant};

    const CODE: &str = "fn main() {\n    let x = 1;\n}\n";

    fn highlighted_within(limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if highlight("rust", CODE).is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    #[test]
    fn the_set_is_dropped_when_unused_and_loaded_again_by_the_next_code_block() {
        assert!(highlighted_within(Duration::from_secs(30)), "highlighting never loaded");
        let loaded_epoch = epoch();
        // Unused for longer than KEEP_FOR: the loader thread drops the set.
        let deadline = Instant::now() + KEEP_FOR * 20;
        while state().loaded.is_some() || state().loading {
            assert!(Instant::now() < deadline, "the unused set was never dropped");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The next code block loads it again (showing plain meanwhile), under a new epoch,
        // so renders cached plain meanwhile are redone.
        assert!(highlighted_within(Duration::from_secs(30)), "highlighting never came back");
        assert!(epoch() > loaded_epoch);
    }
}
