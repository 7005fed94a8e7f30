//! Any text: `parse_patch` never panics, and a patch it accepts prints (`Display`) to
//! canonical text that parses back to the same patch.
#![no_main]

use kestrel_tools::apply_patch::parse_patch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(patch) = parse_patch(text) else { return };
    let canonical = patch.to_string();
    match parse_patch(&canonical) {
        Ok(again) => assert_eq!(again, patch, "canonical text:\n{canonical}"),
        Err(error) => panic!("canonical text does not parse ({error}):\n{canonical}"),
    }
});
