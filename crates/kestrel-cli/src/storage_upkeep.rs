//! The automatic clean-up of checkpoint data (`[storage]` in config.toml), run by every
//! exec and worker at most once an hour, in a thread of its own: a session never waits
//! for it.

use kestrel_store::{Config, KestrelHome};
use std::thread::JoinHandle;

/// Starts the clean-up; `log` hears what was removed. Join the handle to wait for it.
pub fn clean_up_in_background(home: KestrelHome, log: fn(&str)) -> Option<JoinHandle<()>> {
    let spawned = std::thread::Builder::new().name("clean-up".into()).spawn(move || {
        // The user's settings: a repository's config may not set `[storage]`.
        let settings =
            Config::load(&home, home.root()).map(|config| config.storage).unwrap_or_default();
        match kestrel_store::clean_checkpoints_if_due(&home, &settings) {
            Some(Ok(report)) if !report.removed.is_empty() => {
                let bytes: u64 = report.removed.iter().map(|(_, bytes)| bytes).sum();
                log(&format!(
                    "removed the checkpoint data of {} sessions ({} bytes): unused for more \
                     than {} days, or over {} MB in all",
                    report.removed.len(),
                    bytes,
                    settings.checkpoint_days,
                    settings.checkpoint_max_mb
                ));
            }
            Some(Err(error)) => log(&format!("checkpoint clean-up failed: {error}")),
            Some(Ok(_)) | None => {}
        }
    });
    spawned.ok()
}
