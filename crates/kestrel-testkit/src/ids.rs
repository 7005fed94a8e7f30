//! Real-looking ids (`chatcmpl-...`, `call_...`, `toolu_...`): pseudo-random but
//! deterministic per server, so two runs of one script produce the same ids.

use std::sync::atomic::{AtomicU64, Ordering};

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// Makes ids; shared by all connections of one server.
#[derive(Debug, Default)]
pub(crate) struct IdGenerator {
    counter: AtomicU64,
}

impl IdGenerator {
    /// `prefix` followed by `length` base-62 characters.
    pub fn next(&self, prefix: &str, length: usize) -> String {
        let mut state = self.counter.fetch_add(1, Ordering::Relaxed).wrapping_add(0x5eed);
        let mut id = String::with_capacity(prefix.len() + length);
        id.push_str(prefix);
        for _ in 0..length {
            let value = splitmix64(&mut state);
            id.push(char::from(ALPHABET[(value % ALPHABET.len() as u64) as usize]));
        }
        id
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_distinct_and_shaped() {
        let ids = IdGenerator::default();
        let first = ids.next("call_", 24);
        let second = ids.next("call_", 24);
        assert_ne!(first, second);
        assert_eq!(first.len(), 29);
        assert!(first.starts_with("call_"));
        assert!(first[5..].chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
