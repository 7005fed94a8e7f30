//! The real Ray head that the `ray` executor's tests run on: `.ci/run` starts one
//! (`scripts/ray-head start`, pinned ports, its own temp dir) and exports its Jobs API
//! address in `KESTREL_TEST_RAY_ADDRESS`. Without it a test cannot run: under CI that is a
//! failure, on a developer's machine a skip that says how to start a head.

#![allow(clippy::print_stderr)]

/// The variable holding the test head's Jobs API address (`http://127.0.0.1:PORT`).
pub const RAY_ADDRESS_VAR: &str = "KESTREL_TEST_RAY_ADDRESS";

/// The test head's address; `None` after printing why when there is none outside CI, so
/// the caller returns early: `let Some(address) = ray::address("test name") else { return };`.
///
/// Panics when `CI` is set and the variable is unset or empty: CI must never skip these.
pub fn address(test: &str) -> Option<String> {
    let address = std::env::var(RAY_ADDRESS_VAR).ok().filter(|value| !value.trim().is_empty());
    match (address, std::env::var_os("CI").is_some()) {
        (Some(address), _) => Some(address.trim().trim_end_matches('/').to_owned()),
        (None, true) => panic!(
            "{test}: {RAY_ADDRESS_VAR} is not set under CI: .ci/run starts the Ray head \
             (scripts/ray-head start) and exports it before the tests"
        ),
        (None, false) => {
            eprintln!(
                "skipped {test}: no Ray head ({RAY_ADDRESS_VAR} is unset); run \
                 `export {RAY_ADDRESS_VAR}=$(scripts/ray-head start)` first \
                 (scripts/ray-head stop ends it)"
            );
            None
        }
    }
}
