//! Permission modes (ARCHITECTURE §7). Their ids are also the ACP session mode ids.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How much a session may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Reads only: no writes, only known read-only commands.
    ReadOnly,
    /// Asks before writes and commands not known to be safe.
    Ask,
    /// File writes inside the workspace and sandboxed commands run without asking.
    Auto,
    /// No checks.
    Yolo,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::ReadOnly, Mode::Ask, Mode::Auto, Mode::Yolo];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::Yolo => "yolo",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == text)
            .ok_or_else(|| format!("unknown mode `{text}`: expected read-only, ask, auto or yolo"))
    }
}
