//! Image pixel sizes read from headers (PNG IHDR, JPEG SOFn, GIF logical screen, WebP
//! VP8/VP8L/VP8X): an image over the providers' 8000 px a side is refused where it enters
//! (read_file, MCP results, prompts: `checked_image`) with its size and the limit, and a
//! header that is cut off or lies is a clear error, never a panic. A file visibly cut off
//! (no IEND, no end of image, no trailer, a RIFF size that is not its length) and an
//! animated GIF are refused; junk between JPEG segments and a JPEG height left to a DNL
//! marker are taken, as libjpeg takes them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{call, context, err, ok};
use kestrel_protocol::Mode;
use kestrel_tools::{ImageSize, MAX_IMAGE_SIDE, checked_image, image_size};
use serde_json::json;

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
    bytes.extend(width.to_be_bytes());
    bytes.extend(height.to_be_bytes());
    // Bit depth, colour type, compression, filter, interlace, then a CRC (not checked).
    bytes.extend([8, 6, 0, 0, 0, 0x1F, 0x15, 0xC4, 0x89]);
    // Image data (an empty IDAT: its contents are not checked), then the end.
    bytes.extend([0, 0, 0, 0, b'I', b'D', b'A', b'T', 0x35, 0xAF, 0x06, 0x1E]);
    bytes.extend(PNG_END);
    bytes
}

/// A PNG's last chunk: IEND, empty, with its CRC.
const PNG_END: [u8; 12] = [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82];

/// A GIF of a `width`×`height` screen whose one frame fills its lower right quarter (so
/// every byte that places or sizes the frame depends on the size, as the screen's do).
fn gif(width: u16, height: u16) -> Vec<u8> {
    let (left, top) = (width / 2, height / 2);
    gif_frames((width, height), &[(left, top, width - left, height - top)], &[])
}

/// A JPEG with an APP0 segment and an EXIF-like segment holding a decoy SOF marker (it
/// must be skipped by its length), then a progressive frame header (SOF2).
fn jpeg(width: u16, height: u16) -> Vec<u8> {
    let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 6, b'J', b'F', b'I', b'F'];
    bytes.extend([0xFF, 0xE1, 0, 9, 0xFF, 0xC0, 0, 11, 8, 0x7F, 0x7F]);
    // Fill bytes before a marker are allowed.
    bytes.extend([0xFF, 0xFF, 0xC2, 0, 11, 8]);
    bytes.extend(height.to_be_bytes());
    bytes.extend(width.to_be_bytes());
    bytes.extend([1, 1, 0x11, 0, 0xFF, 0xDA, 0, 2, 0xFF, 0xD9]);
    bytes
}

fn webp(chunk: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut bytes = b"RIFF\0\0\0\0WEBP".to_vec();
    bytes.extend(chunk);
    bytes.extend(u32::try_from(payload.len()).unwrap().to_le_bytes());
    bytes.extend(payload);
    let riff_size = u32::try_from(bytes.len() - 8).unwrap();
    bytes[4..8].copy_from_slice(&riff_size.to_le_bytes());
    bytes
}

fn webp_lossy(width: u16, height: u16) -> Vec<u8> {
    let mut payload = vec![0x10, 0x02, 0, 0x9D, 0x01, 0x2A];
    payload.extend(width.to_le_bytes());
    payload.extend(height.to_le_bytes());
    webp(b"VP8 ", &payload)
}

fn webp_lossless(width: u32, height: u32) -> Vec<u8> {
    let bits = (width - 1) | ((height - 1) << 14);
    let mut payload = vec![0x2F];
    payload.extend(bits.to_le_bytes());
    webp(b"VP8L", &payload)
}

fn webp_extended(width: u32, height: u32) -> Vec<u8> {
    let mut payload = vec![0x10, 0, 0, 0];
    payload.extend(&(width - 1).to_le_bytes()[..3]);
    payload.extend(&(height - 1).to_le_bytes()[..3]);
    webp(b"VP8X", &payload)
}

fn size(width: u32, height: u32) -> ImageSize {
    ImageSize { width, height }
}

#[test]
fn the_size_is_read_from_the_header_of_each_format() {
    assert_eq!(image_size(&png(640, 480)), Ok(size(640, 480)));
    assert_eq!(image_size(&gif(320, 200)), Ok(size(320, 200)));
    assert_eq!(image_size(&jpeg(1920, 1080)), Ok(size(1920, 1080)));
    assert_eq!(image_size(&webp_lossy(800, 600)), Ok(size(800, 600)));
    assert_eq!(image_size(&webp_lossless(16, 9)), Ok(size(16, 9)));
    assert_eq!(image_size(&webp_extended(8000, 1)), Ok(size(8000, 1)));
}

#[test]
fn an_image_over_the_limit_is_refused_naming_its_size_and_the_limit() {
    let too_big = [
        (png(9000, 10), "9000×10 pixels"),
        (png(10, 8001), "10×8001 pixels"),
        (gif(8001, 8001), "8001×8001 pixels"),
        (jpeg(12_000, 9_000), "12000×9000 pixels"),
        (webp_lossy(16_000, 100), "16000×100 pixels"),
        (webp_lossless(16_384, 2), "16384×2 pixels"),
        (webp_extended(20_000, 3), "20000×3 pixels"),
    ];
    for (bytes, expected) in too_big {
        let error = image_size(&bytes).unwrap_err();
        assert!(error.contains(expected), "{expected}: {error}");
        assert!(error.contains(&format!("at most {MAX_IMAGE_SIDE} pixels a side")), "{error}");
    }
}

#[test]
fn a_header_that_lies_is_a_clear_error() {
    let sof_after_scan = [0xFF, 0xD8, 0xFF, 0xDA, 0, 2, 0xFF, 0xC0, 0, 11, 8, 0, 1, 0, 1, 1];
    let zero_length = [0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 0xFF, 0xC0, 0, 11, 8, 0, 1, 0, 1, 1];
    let stray = [0xFF, 0xD8, 0xFF, 0x00, 0, 0];
    let mut not_ihdr = png(1, 1);
    not_ihdr[12..16].copy_from_slice(b"IDAT");
    let mut no_start_code = webp_lossy(10, 10);
    no_start_code[23] = 0;
    let mut no_signature = webp_lossless(10, 10);
    no_signature[20] = 0;
    let cases: [(&[u8], &str); 9] = [
        (&png(0, 5), "the PNG header says the image is 0×5 pixels"),
        (&gif_frames((7, 0), &[(0, 0, 7, 0)], &[]), "a GIF frame is 7×0 pixels"),
        (&not_ihdr, "the PNG header does not start with an IHDR chunk"),
        (&sof_after_scan, "the JPEG header has no frame header (SOF) before the image data"),
        (&zero_length, "the JPEG header has a segment shorter than its own length field"),
        (&stray, "the JPEG header has a stray 0xFF byte"),
        (&webp(b"ALPH", &[0; 10]), "the WebP header starts with an unknown chunk"),
        (&no_start_code, "the WebP header has a VP8 chunk without a key frame start code"),
        (&no_signature, "the WebP header has a VP8L chunk without its signature byte"),
    ];
    for (bytes, expected) in cases {
        let error = image_size(bytes).unwrap_err();
        assert!(error.starts_with(expected), "{expected}: {error}");
    }
    assert!(image_size(b"BM not an image").unwrap_err().contains("not a PNG, JPEG, GIF or WebP"));
}

#[test]
fn a_header_cut_anywhere_is_an_error_never_a_panic() {
    let whole = [
        png(3, 4),
        gif(3, 4),
        jpeg(3, 4),
        webp_lossy(3, 4),
        webp_lossless(3, 4),
        webp_extended(3, 4),
    ];
    for bytes in &whole {
        assert_eq!(image_size(bytes), Ok(size(3, 4)));
        // Every prefix that still has the signature but not the size says it is cut off.
        let sized_at = (1..=bytes.len()).find(|&end| image_size(&bytes[..end]).is_ok()).unwrap();
        for end in 0..sized_at {
            let error = image_size(&bytes[..end]).unwrap_err();
            assert!(
                error.contains("cut off") || error.contains("not a PNG, JPEG, GIF or WebP"),
                "{end} bytes of {bytes:?}: {error}"
            );
        }
    }
    // A JPEG segment length that points past the end is cut off too.
    let mut long_segment = jpeg(3, 4);
    long_segment[5] = 0xFF;
    assert!(image_size(&long_segment).unwrap_err().contains("cut off"));
}

#[test]
fn damaged_headers_never_panic_and_never_change_a_size_they_do_not_touch() {
    // Every byte of each file set to values that matter to the parsers. A file taken
    // after the damage has the size it was built with, unless the damage hit the bytes
    // of the size itself (those that differ between a 3×4 and a 5×6 or 3855×3598 build).
    type Build = fn(u32, u32) -> Vec<u8>;
    let builds: [(&str, Build); 5] = [
        ("png", png),
        ("gif", |w, h| gif(w as u16, h as u16)),
        ("jpeg", |w, h| jpeg(w as u16, h as u16)),
        ("webp lossy", |w, h| webp_lossy(w as u16, h as u16)),
        ("webp lossless", webp_lossless),
    ];
    for (name, build) in builds {
        let bytes = build(3, 4);
        let others = [build(5, 6), build(0x0F0F, 0x0E0E)];
        for index in 0..bytes.len() {
            let in_size = others.iter().any(|other| bytes[index] != other[index]);
            for value in [0x00, 0x01, 0x2F, 0x3B, 0x7F, 0x9D, 0xC0, 0xD9, 0xDA, 0xFF] {
                let mut damaged = bytes.clone();
                damaged[index] = value;
                let Ok(found) = image_size(&damaged) else { continue };
                if in_size {
                    assert!((1..=MAX_IMAGE_SIDE).contains(&found.width), "{name}: {found:?}");
                    assert!(found.height <= MAX_IMAGE_SIDE, "{name}: {found:?}");
                } else {
                    assert_eq!(found, size(3, 4), "{name}, byte {index} set to {value:#04X}");
                }
            }
        }
    }
}

#[test]
fn a_file_cut_off_after_its_header_is_refused() {
    let mut png_without_end = png(3, 4);
    png_without_end.truncate(png_without_end.len() - PNG_END.len());
    let mut png_long_chunk = png(3, 4);
    png_long_chunk[33..37].copy_from_slice(&1000u32.to_be_bytes());
    let jpeg_without_end = jpeg(3, 4)[..jpeg(3, 4).len() - 2].to_vec();
    let gif_without_trailer = gif(3, 4)[..13].to_vec();
    let mut webp_short = webp_lossless(3, 4);
    webp_short[4..8].copy_from_slice(&19u32.to_le_bytes());
    let cases: [(&[u8], &str); 5] = [
        (&png_without_end, "the PNG file is cut off: it ends before its IEND chunk"),
        (&png_long_chunk, "the PNG file is cut off: a chunk runs past its end"),
        (&jpeg_without_end, "the JPEG file is cut off: it has no end-of-image marker"),
        (&gif_without_trailer, "the GIF file is cut off: it ends before its trailer"),
        (
            &webp_short,
            "the WebP file is cut off: its RIFF header says 19 bytes follow, the file has 17",
        ),
    ];
    for (bytes, expected) in cases {
        let error = image_size(bytes).unwrap_err();
        assert!(error.starts_with(expected), "{expected}: {error}");
    }
    // PNG's, JPEG's and WebP's trailing bytes after the end are ignored, as decoders do.
    let mut trailing = webp_lossless(3, 4);
    trailing.extend([0, 0]);
    assert_eq!(image_size(&trailing), Ok(size(3, 4)));
    let mut trailing = png(3, 4);
    trailing.extend(b"trailing");
    assert_eq!(image_size(&trailing), Ok(size(3, 4)));
    let mut trailing = jpeg(3, 4);
    trailing.extend([0, 0, 0]);
    assert_eq!(image_size(&trailing), Ok(size(3, 4)));
}

/// A GIF with one 8×8 frame at (`left`, `top`) of `width`×`height` and `extensions` first.
fn gif_frames(screen: (u16, u16), frames: &[(u16, u16, u16, u16)], extension: &[u8]) -> Vec<u8> {
    let mut bytes = b"GIF89a".to_vec();
    bytes.extend(screen.0.to_le_bytes());
    bytes.extend(screen.1.to_le_bytes());
    // A global colour table of 2 entries.
    bytes.extend([0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF]);
    bytes.extend(extension);
    for &(left, top, width, height) in frames {
        bytes.push(0x2C);
        for value in [left, top, width, height] {
            bytes.extend(value.to_le_bytes());
        }
        bytes.extend([0, 2, 2, 0x44, 0x01, 0]);
    }
    bytes.push(0x3B);
    bytes
}

#[test]
fn gif_frames_are_read_and_an_animated_gif_is_refused() {
    let netscape = [
        0x21, 0xFF, 11, b'N', b'E', b'T', b'S', b'C', b'A', b'P', b'E', b'2', b'.', b'0', 3, 1, 0,
        0, 0,
    ];
    let comment = [0x21, 0xFE, 3, b'h', b'i', b'!', 0];
    assert_eq!(image_size(&gif_frames((10, 10), &[(0, 0, 10, 10)], &comment)), Ok(size(10, 10)));
    // A screen of 0×0 shows its frame; a frame past the screen counts.
    assert_eq!(image_size(&gif_frames((0, 0), &[(0, 0, 10, 10)], &[])), Ok(size(10, 10)));
    assert_eq!(image_size(&gif_frames((10, 10), &[(5, 0, 20, 3)], &[])), Ok(size(25, 10)));
    let huge_frame = image_size(&gif_frames((10, 10), &[(0, 0, 9000, 9000)], &[])).unwrap_err();
    assert!(huge_frame.contains("9000×9000 pixels"), "{huge_frame}");
    let two_frames = gif_frames((10, 10), &[(0, 0, 10, 10), (0, 0, 10, 10)], &[]);
    let looping = gif_frames((10, 10), &[(0, 0, 10, 10)], &netscape);
    for bytes in [two_frames, looping] {
        let error = image_size(&bytes).unwrap_err();
        assert!(error.starts_with("the GIF is animated: models take still images only"), "{error}");
    }
    let mut unknown = gif_frames((10, 10), &[(0, 0, 10, 10)], &[]);
    let at = unknown.len() - 1;
    unknown.insert(at, 0x99);
    assert!(image_size(&unknown).unwrap_err().contains("unknown block (0x99)"));
}

#[test]
fn jpeg_junk_between_segments_and_a_height_left_to_dnl_are_taken() {
    let mut junk = jpeg(30, 20);
    // Junk bytes between the APP0 and APP1 segments.
    junk.splice(10..10, [0x00, 0x12, 0x34]);
    assert_eq!(image_size(&junk), Ok(size(30, 20)));
    let dnl = jpeg(30, 0);
    assert_eq!(image_size(&dnl), Ok(size(30, 0)));
}

#[test]
fn checked_image_refuses_an_image_too_large_in_pixels() {
    let data = kestrel_protocol::base64::encode(&png(8500, 600));
    let error = checked_image("image/png", &data).unwrap_err();
    assert!(error.contains("8500×600 pixels") && error.contains("8000"), "{error}");
    let data = kestrel_protocol::base64::encode(&jpeg(1, 1)[..12]);
    assert!(checked_image("image/jpeg", &data).unwrap_err().contains("cut off"));
    let data = kestrel_protocol::base64::encode(&png(8000, 8000));
    assert_eq!(checked_image("image/png", &data).unwrap().media_type, "image/png");
    // A PNG declared as JPEG (the type picked from a file name) goes as what it is.
    assert_eq!(checked_image("image/jpeg", &data).unwrap().media_type, "image/png");
    let cut = kestrel_protocol::base64::encode(&png(10, 10)[..30]);
    assert!(checked_image("image/png", &cut).unwrap_err().contains("cut off"));
}

#[tokio::test]
async fn read_file_refuses_an_image_too_large_in_pixels_or_with_a_broken_header() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("wide.png"), png(10_000, 50)).unwrap();
    std::fs::write(dir.path().join("cut.png"), &png(1, 1)[..20]).unwrap();
    std::fs::write(dir.path().join("fine.gif"), gif(7, 7)).unwrap();
    let ctx = context(dir.path(), Mode::Auto);

    let output = call(&ctx, "read_file", json!({"path": "wide.png"})).await;
    let message = err(&output);
    assert!(message.starts_with("wide.png is an image (image/png) that cannot be shown"));
    assert!(message.contains("10000×50 pixels") && message.contains("8000"), "{message}");
    assert!(output.images.is_empty());

    let output = call(&ctx, "read_file", json!({"path": "cut.png"})).await;
    assert!(err(&output).contains("the PNG header is cut off"), "{}", output.content);
    assert!(output.images.is_empty());

    let output = call(&ctx, "read_file", json!({"path": "fine.gif"})).await;
    assert!(ok(&output).starts_with("[image: image/gif] fine.gif"));
    assert_eq!(output.images.len(), 1);
}
