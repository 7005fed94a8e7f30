//! Model-facing names of MCP tools: `mcp__<server>__<tool>`, made to fit every
//! provider's rule for function names (`[a-zA-Z0-9_-]`, at most 64 characters).
//! Invariant: a name is a pure function of the server and tool names, so a resumed
//! session calls the same tools by the same names.

/// The longest function name the providers accept.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// `mcp__<server>__`, the start of every tool name of `server`.
pub(crate) fn prefix(server: &str) -> String {
    format!("mcp__{}__", sanitize(server))
}

/// The name the model calls `tool` of `server` by. Characters the providers refuse
/// become `_`; a name too long is cut and ends in a hash of the whole, so two long
/// names that share their start stay apart.
pub(crate) fn tool_name(server: &str, tool: &str) -> String {
    let full = format!("{}{}", prefix(server), sanitize(tool));
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    with_hash(&full, &format!("{server}\u{0}{tool}"))
}

/// `name` cut to leave room for `_` and 8 hex digits of a hash of `key`.
pub(crate) fn with_hash(name: &str, key: &str) -> String {
    let hash = format!("_{:08x}", fnv1a(key));
    // `sanitize` leaves ASCII only, so any byte index is a char boundary.
    let keep = name.len().min(MAX_NAME_LEN - hash.len());
    format!("{}{hash}", &name[..keep])
}

fn sanitize(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if cleaned.is_empty() { "_".to_string() } else { cleaned }
}

/// FNV-1a (32 bit): stable across builds and platforms, unlike std's hasher.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |hash, byte| (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        name.len() <= MAX_NAME_LEN
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(tool_name("everything", "get-sum"), "mcp__everything__get-sum");
        assert_eq!(prefix("fs"), "mcp__fs__");
    }

    #[test]
    fn refused_characters_become_underscores() {
        let name = tool_name("my server.v2", "read/file ünïcode");
        assert_eq!(name, "mcp__my_server_v2__read_file__n_code");
        assert!(valid(&name));
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let long = "a".repeat(80);
        let first = tool_name("server", &format!("{long}_one"));
        let second = tool_name("server", &format!("{long}_two"));
        assert!(valid(&first) && valid(&second), "{first} {second}");
        assert_eq!(first.len(), MAX_NAME_LEN);
        assert_ne!(first, second);
        assert_eq!(first, tool_name("server", &format!("{long}_one")), "stable");
    }

    #[test]
    fn empty_names_still_make_a_name() {
        assert!(valid(&tool_name("", "")));
    }
}
