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

/// The nearest of the 16 ANSI colours: greys by brightness, other colours by hue (so a
/// pastel purple stays purple rather than the grey that is nearest by distance), bright
/// variants for light colours.
fn ansi16(red: u8, green: u8, blue: u8) -> Color {
    let (r, g, b) = (i32::from(red), i32::from(green), i32::from(blue));
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    if max - min < 30 {
        let average = (r + g + b) / 3;
        return if average < 100 {
            Color::DarkGray
        } else if average < 200 {
            Color::Gray
        } else {
            Color::White
        };
    }
    let delta = max - min;
    let hue = if max == r {
        (60 * (g - b) / delta).rem_euclid(360)
    } else if max == g {
        60 * (b - r) / delta + 120
    } else {
        60 * (r - g) / delta + 240
    };
    let bright = max > 200;
    let pick = |dark: Color, light: Color| if bright { light } else { dark };
    match hue {
        0..20 | 330..360 => pick(Color::Red, Color::LightRed),
        20..70 => pick(Color::Yellow, Color::LightYellow),
        70..160 => pick(Color::Green, Color::LightGreen),
        160..200 => pick(Color::Cyan, Color::LightCyan),
        200..260 => pick(Color::Blue, Color::LightBlue),
        _ => pick(Color::Magenta, Color::LightMagenta),
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
        assert_eq!(ansi16(180, 142, 173), Color::Magenta, "base16's keyword purple");
        assert_eq!(ansi16(163, 190, 140), Color::Green, "base16's string green");
        assert_eq!(ansi16(192, 197, 206), Color::Gray, "base16's text");
    }
}
