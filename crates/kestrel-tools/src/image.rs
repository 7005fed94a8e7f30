//! What an image must be to reach a model: one of the four types every provider takes
//! (PNG, JPEG, GIF, WebP), valid base64, at most [`MAX_IMAGE_BYTES`] decoded, at most
//! [`MAX_IMAGE_SIDE`] pixels a side (read from the header: no decoding), not visibly cut
//! off (PNG's IEND chunk, JPEG's end of image, GIF's trailer, WebP's RIFF size) and, for
//! a GIF, not animated. One check for every source (`read_file`, MCP results, prompts),
//! since an image a provider refuses stays in the history and fails later requests.

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
    /// 0 only for a JPEG whose frame header leaves the height to a DNL marker after the
    /// first scan (libjpeg takes such files): the height is then unknown.
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
/// The type is what the bytes say: one declared wrongly (a PNG named `.jpg`, the
/// non-standard `image/jpg`) goes under its real type. Fails with why not (for a note in
/// its place): no data, data that is not base64, bytes of none of the four types (SVG,
/// BMP), more than [`MAX_IMAGE_BYTES`], or a file [`image_size`] refuses.
pub fn checked_image(media_type: &str, data: &str) -> Result<ToolImage, String> {
    if data.trim().is_empty() {
        return Err("the image has no data".into());
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
    let Some(actual) = sniff(&bytes) else {
        return Err(
            if matches!(media_type, "image/png" | "image/jpeg" | "image/gif" | "image/webp") {
                format!("the data is not a {media_type} image (nor PNG, JPEG, GIF or WebP)")
            } else {
                format!("{media_type:?} is not an image type models take (PNG, JPEG, GIF or WebP)")
            },
        );
    };
    image_size(&bytes)?;
    // Sent without the line breaks MIME encoders add: providers refuse them.
    Ok(ToolImage {
        media_type: actual.to_string(),
        data: data.chars().filter(|c| !c.is_ascii_whitespace()).collect(),
    })
}

/// The pixel size of a whole PNG, JPEG, GIF or WebP file, as its header declares it
/// (for a GIF, the logical screen or, when larger, its frames), checked against
/// [`MAX_IMAGE_SIDE`]. Fails, saying why, on another type, a header that is cut off or
/// does not follow its format, a side of 0 pixels, a side over the limit, a file visibly
/// cut off (a PNG without its IEND chunk, a JPEG without its end-of-image marker after
/// the frame header, a GIF without its trailer, a WebP whose RIFF size is more than its
/// length), or an animated GIF (OpenAI takes still GIFs only).
pub fn image_size(bytes: &[u8]) -> Result<ImageSize, String> {
    let (format, size) = match sniff(bytes) {
        Some("image/png") => (Format::Png, png_size(bytes).map(|size| (size, 0))),
        Some("image/jpeg") => (Format::Jpeg, jpeg_size(bytes)),
        Some("image/gif") => (Format::Gif, gif_size(bytes).map(|size| (size, 0))),
        Some("image/webp") => (Format::WebP, webp_size(bytes).map(|size| (size, 0))),
        Some(_) | None => return Err("the data is not a PNG, JPEG, GIF or WebP image".into()),
    };
    let name = format.name();
    let (size, frame_end) = size.map_err(|why| format!("the {name} header {why}"))?;
    let size = match format {
        Format::Gif => gif_blocks(bytes, size)?,
        Format::Png | Format::Jpeg | Format::WebP => size,
    };
    let ImageSize { width, height } = size;
    // A JPEG may leave its height to a DNL marker (ImageSize::height).
    if width == 0 || (height == 0 && format != Format::Jpeg) {
        return Err(format!("the {name} header says the image is {width}×{height} pixels"));
    }
    if width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE {
        return Err(format!(
            "the image is {width}×{height} pixels: models take at most {MAX_IMAGE_SIDE} \
             pixels a side (scale it down first)"
        ));
    }
    let complete = match format {
        Format::Png => png_complete(bytes).map_err(String::from),
        Format::Jpeg => jpeg_complete(bytes, frame_end).map_err(String::from),
        Format::WebP => webp_complete(bytes),
        // Its blocks were walked to the trailer above.
        Format::Gif => Ok(()),
    };
    complete.map_err(|why| format!("the {name} file is cut off: {why}"))?;
    Ok(size)
}

/// The four image formats, as [`sniff`] tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Png,
    Jpeg,
    Gif,
    WebP,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Png => "PNG",
            Format::Jpeg => "JPEG",
            Format::Gif => "GIF",
            Format::WebP => "WebP",
        }
    }
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
/// (SOF0–SOF15 but DHT, JPG and DAC), which holds the height, then the width. Bytes
/// between segments that are not a marker are skipped, as libjpeg does. Returns the
/// size and where the frame header ends.
fn jpeg_size(bytes: &[u8]) -> Result<(ImageSize, usize), &'static str> {
    let mut at = 2;
    loop {
        // Junk before a marker (some writers leave it): skip to the next 0xFF.
        while bytes.get(at).is_some_and(|&byte| byte != 0xFF) {
            at += 1;
        }
        if at >= bytes.len() {
            return Err(CUT_OFF);
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
            return Ok((ImageSize { width, height }, at + length as usize));
        }
        at += length as usize;
    }
}

/// GIF: the blocks after the logical screen (and its global colour table), up to the
/// trailer: extensions and image descriptors, each frame within [`MAX_IMAGE_SIDE`].
/// Returns the size to check: the screen, or the frames' extent where it is larger (a
/// screen of 0×0 shows its frame). Refuses an animated GIF (a NETSCAPE2.0 or ANIMEXTS1.0
/// loop extension, or a second frame) and one cut off before its trailer.
fn gif_blocks(bytes: &[u8], screen: ImageSize) -> Result<ImageSize, String> {
    const CUT: &str = "the GIF file is cut off: it ends before its trailer (0x3B)";
    let colour_table = |flags: u8| if flags & 0x80 != 0 { 3usize << ((flags & 7) + 1) } else { 0 };
    let flags = *bytes.get(10).ok_or(CUT)?;
    let mut at = 13 + colour_table(flags);
    let mut size = screen;
    let mut frames = 0u32;
    loop {
        match bytes.get(at) {
            None => return Err(CUT.into()),
            Some(0x3B) => break,
            Some(0x21) => {
                let label = *bytes.get(at + 1).ok_or(CUT)?;
                at += 2;
                let first = bytes.get(at + 1..at + 12);
                if label == 0xFF
                    && bytes.get(at) == Some(&11)
                    && matches!(first, Some(b"NETSCAPE2.0" | b"ANIMEXTS1.0"))
                {
                    return Err(animated());
                }
                at = skip_sub_blocks(bytes, at).ok_or(CUT)?;
            }
            Some(0x2C) => {
                frames += 1;
                if frames > 1 {
                    return Err(animated());
                }
                let (Some(left), Some(top), Some(width), Some(height), Some(&flags)) = (
                    le_u16(bytes, at + 1),
                    le_u16(bytes, at + 3),
                    le_u16(bytes, at + 5),
                    le_u16(bytes, at + 7),
                    bytes.get(at + 9),
                ) else {
                    return Err(CUT.into());
                };
                if width == 0 || height == 0 {
                    return Err(format!("a GIF frame is {width}×{height} pixels"));
                }
                size.width = size.width.max(left + width);
                size.height = size.height.max(top + height);
                // Descriptor, local colour table, LZW code size, then the data sub-blocks.
                at = skip_sub_blocks(bytes, at + 10 + colour_table(flags) + 1).ok_or(CUT)?;
            }
            Some(other) => {
                return Err(format!("the GIF file has an unknown block (0x{other:02X})"));
            }
        }
    }
    if frames == 0 {
        return Err("the GIF file has no image in it (no frame before its trailer)".into());
    }
    Ok(size)
}

fn animated() -> String {
    "the GIF is animated: models take still images only (send one frame as PNG)".into()
}

/// Where the sub-blocks starting at `at` end (after their 0 terminator); `None` when
/// the bytes end first.
fn skip_sub_blocks(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let length = usize::from(*bytes.get(at)?);
        at = at.checked_add(1 + length)?;
        if length == 0 {
            return Some(at);
        }
    }
}

/// PNG: the chunks, walked by their lengths, end with IEND (anything after it is ignored,
/// as libpng does), and image data (IDAT) comes before it.
fn png_complete(bytes: &[u8]) -> Result<(), &'static str> {
    let mut at = 8usize;
    let mut data = false;
    loop {
        let (Some(length), Some(kind)) = (be_u32(bytes, at), bytes.get(at + 4..at + 8)) else {
            return Err("it ends before its IEND chunk");
        };
        let next = usize::try_from(length)
            .ok()
            .and_then(|length| at.checked_add(12)?.checked_add(length))
            .filter(|&next| next <= bytes.len())
            .ok_or("a chunk runs past its end (no IEND chunk)")?;
        if kind == b"IEND" {
            return if data { Ok(()) } else { Err("it has no image data (IDAT chunk)") };
        }
        data |= kind == b"IDAT";
        at = next;
    }
}

/// JPEG: an end-of-image marker after the frame header (entropy-coded data escapes 0xFF,
/// so none can appear by chance; an EXIF thumbnail's comes before the frame header).
fn jpeg_complete(bytes: &[u8], frame_end: usize) -> Result<(), &'static str> {
    let rest = bytes.get(frame_end..).unwrap_or_default();
    if rest.windows(2).any(|pair| pair == [0xFF, 0xD9]) {
        Ok(())
    } else {
        Err("it has no end-of-image marker (FF D9) after its frame header")
    }
}

/// WebP: the RIFF size (the bytes after `RIFF` and the size) must be there; bytes after
/// the RIFF chunk are ignored, as libwebp does.
fn webp_complete(bytes: &[u8]) -> Result<(), String> {
    let declared = u64::from(be_u32(bytes, 4).map_or(0, u32::swap_bytes));
    let actual = (bytes.len() as u64).saturating_sub(8);
    if declared <= actual {
        Ok(())
    } else {
        Err(format!("its RIFF header says {declared} bytes follow, the file has {actual}"))
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
        // A 1×1 GIF: a two-colour table, a transparency extension, one frame.
        let gif = "R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7";
        assert!(checked_image("image/gif", gif).is_ok());
        // MIME line breaks are accepted and not passed on.
        let wrapped = format!("{}\n{}\r\n", &PNG[..40], &PNG[40..]);
        assert_eq!(checked_image("image/png", &wrapped).unwrap().data, PNG);
        // Declared wrong, sent as what the bytes are.
        for declared in ["image/jpeg", "image/jpg", "image/svg+xml", "application/octet-stream"] {
            assert_eq!(checked_image(declared, PNG).unwrap().media_type, "image/png");
        }
    }

    /// [`PNG`]'s signature, header and end, its IDAT chunk left out: base64.
    fn png_without_data() -> String {
        let bytes = kestrel_protocol::base64::decode(PNG).unwrap();
        let kept = [&bytes[..33], &bytes[bytes.len() - 12..]].concat();
        kestrel_protocol::base64::encode(&kept)
    }

    #[test]
    fn what_a_provider_would_refuse_is_an_error_saying_why() {
        let huge = "A".repeat(usize::try_from(MAX_IMAGE_BYTES).unwrap() / 3 * 4 + 8);
        let cases = [
            ("image/svg+xml", "PHN2Zy8+".to_string(), "not an image type models take"),
            ("image/bmp", "Qk0=".to_string(), "not an image type models take"),
            ("image/png", "not base64!".to_string(), "not valid base64"),
            ("image/png", "iVBORw0K=Gg=".to_string(), "not valid base64"),
            ("image/png", String::new(), "the image has no data"),
            ("image/webp", "AAAA".to_string(), "not a image/webp image"),
            ("image/png", huge, "too large"),
            // "GIF89a", a 1×1 screen, the trailer: no frame.
            ("image/gif", "R0lGODlhAQABAAAAADs=".to_string(), "no image in it"),
            ("image/png", png_without_data(), "no image data"),
        ];
        for (media_type, data, expected) in cases {
            let error = checked_image(media_type, &data).unwrap_err();
            assert!(error.contains(expected), "{media_type}: {error}");
        }
    }
}
