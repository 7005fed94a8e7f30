//! Colours: the handful of styles the UI uses, and how many colours the terminal has
//! (truecolor, 256 or the 16 ANSI ones), so syntax highlighting degrades instead of
//! printing escape codes a terminal cannot show.

use ratatui::style::{Color, Modifier, Style};
use std::sync::OnceLock;

/// How many colours the terminal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColorDepth {
    TrueColor,
    Ansi256,
    Ansi16,
}

impl ColorDepth {
    /// From `COLORTERM` and `TERM`, as terminals advertise it.
    pub(crate) fn detect() -> ColorDepth {
        let colorterm = std::env::var("COLORTERM").unwrap_or_default();
        let term = std::env::var("TERM").unwrap_or_default();
        Self::from_env(&colorterm, &term)
    }

    fn from_env(colorterm: &str, term: &str) -> ColorDepth {
        if colorterm.eq_ignore_ascii_case("truecolor") || colorterm.eq_ignore_ascii_case("24bit") {
            ColorDepth::TrueColor
        } else if term.contains("256") || term.starts_with("tmux") || term.starts_with("screen-") {
            ColorDepth::Ansi256
        } else {
            ColorDepth::Ansi16
        }
    }
}

/// The terminal's colour depth, detected once.
pub(crate) fn depth() -> ColorDepth {
    static DEPTH: OnceLock<ColorDepth> = OnceLock::new();
    *DEPTH.get_or_init(ColorDepth::detect)
}

/// An RGB colour as the terminal can show it.
pub(crate) fn rgb(red: u8, green: u8, blue: u8) -> Color {
    match depth() {
        ColorDepth::TrueColor => Color::Rgb(red, green, blue),
        ColorDepth::Ansi256 => Color::Indexed(ansi256(red, green, blue)),
        ColorDepth::Ansi16 => ansi16(red, green, blue),
    }
}

/// The nearest colour of xterm's 6x6x6 cube or grey ramp.
fn ansi256(red: u8, green: u8, blue: u8) -> u8 {
    let level = |value: u8| -> u8 {
        if value < 48 {
            0
        } else if value < 115 {
            1
        } else {
            (value - 35) / 40
        }
    };
    let (r, g, b) = (level(red), level(green), level(blue));
    let cube = 16 + 36 * r + 6 * g + b;
    let max = red.max(green).max(blue);
    let min = red.min(green).min(blue);
    if max - min < 10 {
        let average = (u16::from(red) + u16::from(green) + u16::from(blue)) / 3;
        if average < 8 {
            return 16;
        }
        if average > 238 {
            return 231;
        }
        return 232 + u8::try_from((average - 8) / 10).unwrap_or(23).min(23);
    }
    cube
}

/// The nearest of the 16 ANSI colours, by hue and brightness.
fn ansi16(red: u8, green: u8, blue: u8) -> Color {
    let bright = u16::from(red.max(green).max(blue)) > 200;
    let on = |value: u8| value > 100;
    match (on(red), on(green), on(blue), bright) {
        (false, false, false, _) => Color::DarkGray,
        (true, false, false, false) => Color::Red,
        (true, false, false, true) => Color::LightRed,
        (false, true, false, false) => Color::Green,
        (false, true, false, true) => Color::LightGreen,
        (true, true, false, false) => Color::Yellow,
        (true, true, false, true) => Color::LightYellow,
        (false, false, true, false) => Color::Blue,
        (false, false, true, true) => Color::LightBlue,
        (true, false, true, false) => Color::Magenta,
        (true, false, true, true) => Color::LightMagenta,
        (false, true, true, false) => Color::Cyan,
        (false, true, true, true) => Color::LightCyan,
        (true, true, true, false) => Color::Gray,
        (true, true, true, true) => Color::White,
    }
}

pub(crate) fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub(crate) fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub(crate) fn accent() -> Style {
    Style::default().fg(Color::Cyan)
}

pub(crate) fn success() -> Style {
    Style::default().fg(Color::Green)
}

pub(crate) fn warning() -> Style {
    Style::default().fg(Color::Yellow)
}

pub(crate) fn error() -> Style {
    Style::default().fg(Color::Red)
}

pub(crate) fn added() -> Style {
    Style::default().fg(Color::Green)
}

pub(crate) fn removed() -> Style {
    Style::default().fg(Color::Red)
}

pub(crate) fn selected() -> Style {
    Style::default().fg(Color::Cyan).add_modifier(Modifier::BOLD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_follows_colorterm_then_term() {
        assert_eq!(ColorDepth::from_env("truecolor", "xterm"), ColorDepth::TrueColor);
        assert_eq!(ColorDepth::from_env("", "xterm-256color"), ColorDepth::Ansi256);
        assert_eq!(ColorDepth::from_env("", "tmux-256color"), ColorDepth::Ansi256);
        assert_eq!(ColorDepth::from_env("", "xterm"), ColorDepth::Ansi16);
    }

    #[test]
    fn colours_map_to_the_nearest_palette_entry() {
        assert_eq!(ansi256(0, 0, 0), 16);
        assert_eq!(ansi256(255, 255, 255), 231);
        assert_eq!(ansi256(255, 0, 0), 196);
        assert_eq!(ansi16(220, 40, 40), Color::LightRed);
        assert_eq!(ansi16(20, 20, 20), Color::DarkGray);
    }
}
