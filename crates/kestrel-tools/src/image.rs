//! What an image must be to reach a model: one of the four types every provider takes
//! (PNG, JPEG, GIF, WebP), valid base64 whose bytes are of the declared type, at most
//! [`MAX_IMAGE_BYTES`] decoded. One check for every source (`read_file`, MCP results),
//! since an image a provider refuses stays in the history and fails every later request.

use crate::ToolImage;

/// The largest image sent: its base64 stays within Anthropic's 5 MB per image (the
/// strictest of the providers).
pub const MAX_IMAGE_BYTES: u64 = 3_750_000;

/// The image type `head` (a file's first 12 bytes or more) announces, for the four types
/// every provider takes.
pub(crate) fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The image `data` (base64) declared as `media_type`, when every provider would take it.
/// Fails with why not (for a note in its place): another type (`image/svg+xml`, the
/// non-standard `image/jpg`), bytes that are not base64 or not of the declared type, or
/// more than [`MAX_IMAGE_BYTES`].
pub fn checked_image(media_type: &str, data: &str) -> Result<ToolImage, String> {
    if !matches!(media_type, "image/png" | "image/jpeg" | "image/gif" | "image/webp") {
        return Err(format!(
            "{media_type:?} is not an image type models take (PNG, JPEG, GIF or WebP)"
        ));
    }
    // Base64 is 4 characters per 3 bytes: refuse a huge one before decoding it.
    let decoded_at_most = (data.len() as u64).div_ceil(4) * 3;
    if decoded_at_most > MAX_IMAGE_BYTES + 3 {
        return Err(format!("the image is too large: at most {MAX_IMAGE_BYTES} bytes"));
    }
    let bytes =
        kestrel_protocol::base64::decode(data).ok_or("the image data is not valid base64")?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(format!(
            "the image is too large ({} bytes): at most {MAX_IMAGE_BYTES} bytes",
            bytes.len()
        ));
    }
    match sniff(&bytes) {
        // Sent without the line breaks MIME encoders add: providers refuse them.
        Some(actual) if actual == media_type => Ok(ToolImage {
            media_type: media_type.to_string(),
            data: data.chars().filter(|c| !c.is_ascii_whitespace()).collect(),
        }),
        Some(actual) => Err(format!("the data is {actual}, not the declared {media_type}")),
        None => Err(format!("the data is not a {media_type} image")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG, base64.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";

    #[test]
    fn the_four_types_pass_when_their_bytes_match() {
        let image = checked_image("image/png", PNG).unwrap();
        assert_eq!((image.media_type.as_str(), image.data.as_str()), ("image/png", PNG));
        // "GIF89a" + padding, base64.
        assert!(checked_image("image/gif", "R0lGODlhAQABAAAAACw=").is_ok());
        // MIME line breaks are accepted and not passed on.
        let wrapped = format!("{}\n{}\r\n", &PNG[..40], &PNG[40..]);
        assert_eq!(checked_image("image/png", &wrapped).unwrap().data, PNG);
    }

    #[test]
    fn what_a_provider_would_refuse_is_an_error_saying_why() {
        let huge = "A".repeat(usize::try_from(MAX_IMAGE_BYTES).unwrap() / 3 * 4 + 8);
        let cases = [
            ("image/svg+xml", PNG.to_string(), "not an image type models take"),
            ("image/bmp", PNG.to_string(), "not an image type models take"),
            ("image/jpg", PNG.to_string(), "not an image type models take"),
            ("image/png", "not base64!".to_string(), "not valid base64"),
            ("image/png", "iVBORw0K=Gg=".to_string(), "not valid base64"),
            ("image/png", String::new(), "not valid base64"),
            ("image/jpeg", PNG.to_string(), "is image/png, not the declared image/jpeg"),
            ("image/webp", "AAAA".to_string(), "not a image/webp image"),
            ("image/png", huge, "too large"),
        ];
        for (media_type, data, expected) in cases {
            let error = checked_image(media_type, &data).unwrap_err();
            assert!(error.contains(expected), "{media_type}: {error}");
        }
    }
}
