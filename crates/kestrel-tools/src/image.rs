//! What an image must be to reach a model: one of the four types every provider takes
//! (PNG, JPEG, GIF, WebP), valid base64 whose bytes are of the declared type, at most
//! [`MAX_IMAGE_BYTES`] decoded and at most [`MAX_IMAGE_SIDE`] pixels a side (read from
//! the header: no decoding). One check for every source (`read_file`, MCP results,
//! prompts), since an image a provider refuses stays in the history and fails every
//! later request.

use crate::ToolImage;

/// The largest image sent: its base64 stays within Anthropic's 5 MB per image (the
/// strictest of the providers).
pub const MAX_IMAGE_BYTES: u64 = 3_750_000;

/// The most pixels an image may have on either side. Anthropic's Messages API refuses
/// an image larger than 8000×8000 px ("Vision" guide, limits); OpenAI scales large images
/// down instead. (Anthropic's 2000 px limit for requests of more than 20 images never
/// applies: the session sends at most 20, see kestrel-agent's image budget.)
pub const MAX_IMAGE_SIDE: u32 = 8_000;

/// An image's size in pixels, as its header declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageSize {
    pub width: u32,
    pub height: u32,
}

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
/// non-standard `image/jpg`), bytes that are not base64 or not of the declared type,
/// more than [`MAX_IMAGE_BYTES`], or a header [`image_size`] refuses.
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
        Some(actual) if actual == media_type => {
            image_size(&bytes)?;
            // Sent without the line breaks MIME encoders add: providers refuse them.
            Ok(ToolImage {
                media_type: media_type.to_string(),
                data: data.chars().filter(|c| !c.is_ascii_whitespace()).collect(),
            })
        }
        Some(actual) => Err(format!("the data is {actual}, not the declared {media_type}")),
        None => Err(format!("the data is not a {media_type} image")),
    }
}

/// The pixel size a PNG, JPEG, GIF or WebP file declares in its header, checked against
/// [`MAX_IMAGE_SIDE`]. `bytes` is the file (or at least its header: a JPEG's frame header
/// may follow large metadata segments). Fails, saying why, on another type, a header that
/// is cut off or does not follow its format, a side of 0 pixels, or a side over the limit.
pub fn image_size(bytes: &[u8]) -> Result<ImageSize, String> {
    let (format, size) = match sniff(bytes) {
        Some("image/png") => ("PNG", png_size(bytes)),
        Some("image/jpeg") => ("JPEG", jpeg_size(bytes)),
        Some("image/gif") => ("GIF", gif_size(bytes)),
        Some("image/webp") => ("WebP", webp_size(bytes)),
        Some(_) | None => return Err("the data is not a PNG, JPEG, GIF or WebP image".into()),
    };
    let size = size.map_err(|why| format!("the {format} header {why}"))?;
    let ImageSize { width, height } = size;
    if width == 0 || height == 0 {
        return Err(format!("the {format} header says the image is {width}×{height} pixels"));
    }
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(format!(
            "the image is {width}×{height} pixels: models take at most {MAX_IMAGE_SIDE} \
             pixels a side (scale it down first)"
        ));
    }
    Ok(size)
}

/// What a header parser says when the bytes end before the size.
const CUT_OFF: &str = "is cut off before the image size";

fn be_u16(bytes: &[u8], at: usize) -> Option<u32> {
    let pair = bytes.get(at..at.checked_add(2)?)?;
    Some(u32::from(u16::from_be_bytes([pair[0], pair[1]])))
}

fn le_u16(bytes: &[u8], at: usize) -> Option<u32> {
    let pair = bytes.get(at..at.checked_add(2)?)?;
    Some(u32::from(u16::from_le_bytes([pair[0], pair[1]])))
}

fn le_u24(bytes: &[u8], at: usize) -> Option<u32> {
    let three = bytes.get(at..at.checked_add(3)?)?;
    Some(u32::from_le_bytes([three[0], three[1], three[2], 0]))
}

fn be_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let four = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([four[0], four[1], four[2], four[3]]))
}

/// PNG: the signature, then the IHDR chunk (length, type, width, height, big-endian).
fn png_size(bytes: &[u8]) -> Result<ImageSize, &'static str> {
    match bytes.get(12..16) {
        Some(b"IHDR") => {}
        Some(_) => return Err("does not start with an IHDR chunk"),
        None => return Err(CUT_OFF),
    }
    let (Some(width), Some(height)) = (be_u32(bytes, 16), be_u32(bytes, 20)) else {
        return Err(CUT_OFF);
    };
    Ok(ImageSize { width, height })
}

/// GIF: the logical screen descriptor after the 6-byte signature (little-endian).
fn gif_size(bytes: &[u8]) -> Result<ImageSize, &'static str> {
    match (le_u16(bytes, 6), le_u16(bytes, 8)) {
        (Some(width), Some(height)) => Ok(ImageSize { width, height }),
        (None, _) | (_, None) => Err(CUT_OFF),
    }
}

/// JPEG: the segments after SOI, skipped by their lengths, up to the first frame header
/// (SOF0–SOF15 but DHT, JPG and DAC), which holds the height, then the width.
fn jpeg_size(bytes: &[u8]) -> Result<ImageSize, &'static str> {
    let mut at = 2;
    loop {
        match bytes.get(at) {
            Some(0xFF) => {}
            Some(_) => return Err("has a segment that does not start with a marker"),
            None => return Err(CUT_OFF),
        }
        // A marker may be preceded by any number of fill bytes (0xFF).
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let Some(&marker) = bytes.get(at) else { return Err(CUT_OFF) };
        at += 1;
        match marker {
            // Markers that stand alone, without a length.
            0x01 | 0xD0..=0xD8 => continue,
            0xD9 | 0xDA => return Err("has no frame header (SOF) before the image data"),
            0x00 => return Err("has a stray 0xFF byte where a marker belongs"),
            _ => {}
        }
        let Some(length) = be_u16(bytes, at) else { return Err(CUT_OFF) };
        if length < 2 {
            return Err("has a segment shorter than its own length field");
        }
        if matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            // Length, sample precision, then height and width.
            let (Some(height), Some(width)) = (be_u16(bytes, at + 3), be_u16(bytes, at + 5)) else {
                return Err(CUT_OFF);
            };
            return Ok(ImageSize { width, height });
        }
        at += length as usize;
    }
}

/// WebP: after `RIFF` size `WEBP`, the first chunk: `VP8 ` (lossy: a key frame's start
/// code, then 14-bit width and height), `VP8L` (lossless: a signature byte, then 14-bit
/// width − 1 and height − 1) or `VP8X` (extended: 24-bit canvas width − 1 and height − 1).
fn webp_size(bytes: &[u8]) -> Result<ImageSize, &'static str> {
    let Some(chunk) = bytes.get(12..16) else { return Err(CUT_OFF) };
    match chunk {
        b"VP8 " => {
            match bytes.get(23..26) {
                Some([0x9D, 0x01, 0x2A]) => {}
                Some(_) => return Err("has a VP8 chunk without a key frame start code"),
                None => return Err(CUT_OFF),
            }
            match (le_u16(bytes, 26), le_u16(bytes, 28)) {
                (Some(width), Some(height)) => {
                    Ok(ImageSize { width: width & 0x3FFF, height: height & 0x3FFF })
                }
                (None, _) | (_, None) => Err(CUT_OFF),
            }
        }
        b"VP8L" => {
            match bytes.get(20) {
                Some(0x2F) => {}
                Some(_) => return Err("has a VP8L chunk without its signature byte"),
                None => return Err(CUT_OFF),
            }
            let Some(four) = bytes.get(21..25) else { return Err(CUT_OFF) };
            let bits = u32::from_le_bytes([four[0], four[1], four[2], four[3]]);
            Ok(ImageSize { width: (bits & 0x3FFF) + 1, height: ((bits >> 14) & 0x3FFF) + 1 })
        }
        b"VP8X" => match (le_u24(bytes, 24), le_u24(bytes, 27)) {
            (Some(width), Some(height)) => Ok(ImageSize { width: width + 1, height: height + 1 }),
            (None, _) | (_, None) => Err(CUT_OFF),
        },
        _ => Err("starts with an unknown chunk (VP8, VP8L or VP8X expected)"),
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
