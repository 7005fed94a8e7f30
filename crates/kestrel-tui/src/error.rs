//! Why the TUI could not run.

/// An error that stops the TUI before or while it runs (problems with the daemon or a
/// session are shown on screen instead).
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error(
        "the interactive UI needs a terminal on stdin and stdout; use `kestrel exec PROMPT` in scripts"
    )]
    NotATerminal,
    /// An environment variable the UI reads holds a value it cannot use.
    #[error("{variable}: {message}")]
    BadEnv { variable: &'static str, message: String },
    #[error("cannot find the Kestrel home: {0}")]
    Home(#[from] kestrel_store::StoreError),
    #[error("cannot use the terminal: {0}")]
    Terminal(#[from] std::io::Error),
}
