//! Any bytes as an image header (PNG IHDR, JPEG SOFn, GIF screen, WebP VP8/VP8L/VP8X):
//! `image_size` never panics, and a size it accepts is within the providers' limit.
#![no_main]

use kestrel_tools::{MAX_IMAGE_SIDE, image_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(size) = image_size(bytes) {
        assert!((1..=MAX_IMAGE_SIDE).contains(&size.width), "{size:?}");
        assert!((1..=MAX_IMAGE_SIDE).contains(&size.height), "{size:?}");
    }
});
