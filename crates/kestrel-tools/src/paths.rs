//! How paths are shown to the model: relative to the session's cwd when inside it,
//! absolute otherwise, always with `/` separators as the model writes them.

use crate::ToolContext;
use std::path::Path;

/// `path` as the model should read (and may send back) it.
pub(crate) fn display(context: &ToolContext, path: &Path) -> String {
    let shown = match path.strip_prefix(&context.cwd) {
        Ok(relative) if relative.as_os_str().is_empty() => Path::new("."),
        Ok(relative) => relative,
        Err(_) => path,
    };
    let text = shown.to_string_lossy();
    if std::path::MAIN_SEPARATOR == '/' { text.into_owned() } else { text.replace('\\', "/") }
}
