//! Image files (PNG, JPEG, GIF, WebP) through `image_size`. Any bytes: it never panics,
//! and a size it takes is within the providers' limit. Files built from the input (a
//! format, a size, and the rest of the input as metadata: a PNG tEXt chunk, a JPEG APP1
//! segment, a GIF comment, a WebP EXIF chunk): the size it reads is the size written,
//! whatever the metadata holds, and it refuses only a side over the limit.
#![no_main]

use kestrel_tools::{ImageSize, MAX_IMAGE_SIDE, image_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    if let Ok(size) = image_size(input) {
        assert!((1..=MAX_IMAGE_SIDE).contains(&size.width), "{size:?}");
        assert!(size.height <= MAX_IMAGE_SIDE, "{size:?}");
    }
    let [format, w0, w1, h0, h1, metadata @ ..] = input else { return };
    // 1..=9000: both sides of the limit.
    let width = u32::from(u16::from_le_bytes([*w0, *w1])) % 9000 + 1;
    let height = u32::from(u16::from_le_bytes([*h0, *h1])) % 9000 + 1;
    let metadata = &metadata[..metadata.len().min(60_000)];
    let bytes = match format % 4 {
        0 => png(width, height, metadata),
        1 => jpeg(width, height, metadata),
        2 => gif(width, height, metadata),
        _ => webp(width, height, metadata),
    };
    match image_size(&bytes) {
        Ok(size) => assert_eq!(size, ImageSize { width, height }, "format {format}"),
        Err(error) => assert!(
            width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE,
            "format {format}, {width}×{height}: {error}"
        ),
    }
});

fn png_chunk(bytes: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    bytes.extend((data.len() as u32).to_be_bytes());
    bytes.extend(kind);
    bytes.extend(data);
    bytes.extend([0, 0, 0, 0]); // CRC, not checked
}

fn png(width: u32, height: u32, metadata: &[u8]) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = width.to_be_bytes().to_vec();
    header.extend(height.to_be_bytes());
    header.extend([8, 6, 0, 0, 0]);
    png_chunk(&mut bytes, b"IHDR", &header);
    png_chunk(&mut bytes, b"tEXt", metadata);
    png_chunk(&mut bytes, b"IDAT", &[0x78, 0x9C, 0x63, 0, 0]);
    png_chunk(&mut bytes, b"IEND", &[]);
    bytes
}

fn jpeg(width: u32, height: u32, metadata: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0xFF, 0xD8, 0xFF, 0xE1];
    bytes.extend((metadata.len() as u16 + 2).to_be_bytes());
    bytes.extend(metadata);
    bytes.extend([0xFF, 0xC0, 0, 11, 8]);
    bytes.extend((height as u16).to_be_bytes());
    bytes.extend((width as u16).to_be_bytes());
    bytes.extend([1, 1, 0x11, 0]);
    // A scan of entropy-coded data (0xFF stuffed), then the end of the image.
    bytes.extend([0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 0x3F, 0, 0x12, 0xFF, 0x00, 0x34]);
    bytes.extend([0xFF, 0xD9]);
    bytes
}

fn gif(width: u32, height: u32, metadata: &[u8]) -> Vec<u8> {
    let mut bytes = b"GIF89a".to_vec();
    bytes.extend((width as u16).to_le_bytes());
    bytes.extend((height as u16).to_le_bytes());
    bytes.extend([0, 0, 0]);
    // A comment extension: the metadata in sub-blocks of at most 255 bytes.
    bytes.extend([0x21, 0xFE]);
    for block in metadata.chunks(255) {
        bytes.push(block.len() as u8);
        bytes.extend(block);
    }
    bytes.push(0);
    bytes.push(0x2C);
    for value in [0, 0, width as u16, height as u16] {
        bytes.extend(value.to_le_bytes());
    }
    bytes.extend([0, 2, 2, 0x44, 0x01, 0, 0x3B]);
    bytes
}

fn webp(width: u32, height: u32, metadata: &[u8]) -> Vec<u8> {
    let mut bytes = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
    bytes.extend(10u32.to_le_bytes());
    bytes.extend([0x08, 0, 0, 0]);
    bytes.extend(&(width - 1).to_le_bytes()[..3]);
    bytes.extend(&(height - 1).to_le_bytes()[..3]);
    bytes.extend(b"EXIF");
    bytes.extend((metadata.len() as u32).to_le_bytes());
    bytes.extend(metadata);
    let riff = (bytes.len() - 8) as u32;
    bytes[4..8].copy_from_slice(&riff.to_le_bytes());
    bytes
}
