//! Images attached to a prompt. Terminals paste text, not pictures: dropping an image
//! file on a terminal (or pasting its path) pastes the path, so a pasted path to an
//! image file becomes an attachment, sent as ACP image content (base64).

use std::path::{Path, PathBuf};

/// Larger files are not attached (providers refuse them anyway).
const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// An image to send with the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) path: PathBuf,
    pub(crate) mime_type: &'static str,
    /// Base64 of the file's bytes.
    pub(crate) data: String,
}

/// The image file a pasted text names, if it is exactly one path to a readable image
/// (quotes, `file://` and backslash-escaped spaces as terminals paste them are undone;
/// relative paths are taken from `cwd`).
pub(crate) fn pasted_image(text: &str, cwd: &Path) -> Option<Image> {
    let text = text.trim();
    if text.is_empty() || text.contains('\n') {
        return None;
    }
    let unquoted = text
        .strip_prefix('\'')
        .and_then(|rest| rest.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')))
        .unwrap_or(text);
    let unescaped = unquoted.replace("\\ ", " ");
    let path = unescaped.strip_prefix("file://").unwrap_or(&unescaped);
    let path = cwd.join(path);
    let mime_type = mime_type(&path)?;
    let metadata = std::fs::metadata(&path).ok()?;
    if !metadata.is_file() || metadata.len() > MAX_IMAGE_BYTES {
        return None;
    }
    let bytes = std::fs::read(&path).ok()?;
    Some(Image { path, mime_type, data: kestrel_protocol::base64::encode(&bytes) })
}

fn mime_type(path: &Path) -> Option<&'static str> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    match extension.as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pasted_image_path_becomes_an_attachment() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("my shot.png"), [1u8, 2, 3]).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let image = pasted_image("'my shot.png'", dir.path()).unwrap();
        assert_eq!(image.mime_type, "image/png");
        assert_eq!(image.data, "AQID");
        assert!(pasted_image("my\\ shot.png", dir.path()).is_some());
        let absolute = format!("file://{}", dir.path().join("my shot.png").display());
        assert!(pasted_image(&absolute, dir.path()).is_some());
        assert!(pasted_image("notes.txt", dir.path()).is_none());
        assert!(pasted_image("missing.png", dir.path()).is_none());
        assert!(pasted_image("a.png\nb.png", dir.path()).is_none());
    }
}
