//! Model-facing names of MCP tools: `mcp__<server>__<tool>`, made to fit every
//! provider's rule for function names (`[a-zA-Z0-9_-]`, at most 64 characters).
//! Invariant: a name is a pure function of the session's server names and the tool
//! name (never of which server started first), so a resumed session calls the same
//! tools by the same names, and no tool shadows another's.

/// The longest function name the providers accept.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// Characters of a server's part of a name before it is cut and hashed.
const MAX_SERVER_LEN: usize = 24;

/// `mcp__<server>__`, the start of every tool name of `server` when no other server of
/// the session cleans up to the same name (see [`prefixes`]). A long server name is cut
/// and ends in a hash, so its tools keep room for their own names.
pub(crate) fn prefix(server: &str) -> String {
    let cleaned = sanitize(server);
    if cleaned.len() <= MAX_SERVER_LEN {
        return format!("mcp__{cleaned}__");
    }
    prefix_with_hash(&cleaned, server)
}

fn prefix_with_hash(cleaned: &str, server: &str) -> String {
    let hash = format!("_{:08x}", fnv1a(server));
    let keep = cleaned.len().min(MAX_SERVER_LEN - hash.len());
    format!("mcp__{}{hash}__", &cleaned[..keep])
}

/// The prefix of each server of a session (in the order given) and a report for each
/// group of servers whose names clean up to the same prefix: those all get a hash of
/// their own name, so none shadows another whatever order they start in.
pub(crate) fn prefixes(servers: &[&str]) -> (Vec<String>, Vec<String>) {
    let plain: Vec<String> = servers.iter().map(|server| prefix(server)).collect();
    let mut reports = Vec::new();
    let mut prefixes = plain.clone();
    for (index, server) in servers.iter().enumerate() {
        let clashing: Vec<&str> = servers
            .iter()
            .zip(&plain)
            .filter(|(_, other)| **other == plain[index])
            .map(|(name, _)| *name)
            .collect();
        if clashing.len() > 1 {
            prefixes[index] = prefix_with_hash(&sanitize(server), server);
            if clashing.first() == Some(server) {
                let named: Vec<String> = clashing
                    .iter()
                    .map(|name| format!("`{name}` → {}", prefix_with_hash(&sanitize(name), name)))
                    .collect();
                reports.push(format!(
                    "MCP servers {} would all name their tools {}…; each gets its own prefix: {}",
                    clashing.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", "),
                    plain[index],
                    named.join(", ")
                ));
            }
        }
    }
    (prefixes, reports)
}

/// The name the model calls `tool` by, for the server whose prefix is `prefix`.
/// `longer` are the other servers' prefixes that start with this one (server `a` and
/// server `a__b`): a tool name that would start with one of them (tool `b__c` of `a`)
/// gets a hash after the prefix instead, so it cannot be taken for the other server's.
/// Characters the providers refuse become `_`; a name too long is cut and ends in a
/// hash of the whole, so two long names that share their start stay apart.
pub(crate) fn tool_name(prefix: &str, tool: &str, longer: &[String]) -> String {
    let mut full = format!("{prefix}{}", sanitize(tool));
    if longer.iter().any(|other| full.starts_with(other.as_str())) {
        full = format!("{prefix}x{:08x}_{}", fnv1a(tool), sanitize(tool));
    }
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    with_hash(&full, &format!("{prefix}\u{0}{tool}"))
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

    fn name(server: &str, tool: &str) -> String {
        tool_name(&prefix(server), tool, &[])
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(name("everything", "get-sum"), "mcp__everything__get-sum");
        assert_eq!(prefix("fs"), "mcp__fs__");
    }

    #[test]
    fn servers_that_clean_up_to_one_name_each_get_their_own_prefix_and_a_report() {
        let (made, reports) = prefixes(&["my.server", "fs", "my_server"]);
        assert_eq!(made[1], "mcp__fs__");
        assert_ne!(made[0], made[2]);
        for prefix in [&made[0], &made[2]] {
            assert!(prefix.starts_with("mcp__my_server_") && prefix.ends_with("__"), "{prefix}");
        }
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert!(reports[0].contains("`my.server`, `my_server`"), "{}", reports[0]);
        // Whatever the order, the same names.
        let (again, _) = prefixes(&["my_server", "my.server"]);
        assert_eq!((&again[1], &again[0]), (&made[0], &made[2]));
    }

    #[test]
    fn a_tool_name_that_would_fall_under_another_servers_prefix_is_hashed() {
        let (made, reports) = prefixes(&["a", "a__b"]);
        assert!(reports.is_empty());
        let longer = vec![made[1].clone()];
        let of_a = tool_name(&made[0], "b__c", &longer);
        let of_ab = tool_name(&made[1], "c", &[]);
        assert_eq!(of_ab, "mcp__a__b__c");
        assert_ne!(of_a, of_ab);
        assert!(of_a.starts_with("mcp__a__x") && !of_a.starts_with(&made[1]), "{of_a}");
        assert_eq!(tool_name(&made[0], "plain", &longer), "mcp__a__plain");
    }

    #[test]
    fn a_long_server_name_leaves_room_for_its_tools() {
        let server = "s".repeat(100);
        let prefix = prefix(&server);
        assert!(prefix.len() <= 5 + MAX_SERVER_LEN + 2, "{prefix}");
        let name = tool_name(&prefix, "read_file", &[]);
        assert!(valid(&name) && name.starts_with(&prefix), "{name}");
    }

    #[test]
    fn refused_characters_become_underscores() {
        let name = name("my server.v2", "read/file ünïcode");
        assert_eq!(name, "mcp__my_server_v2__read_file__n_code");
        assert!(valid(&name));
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let long = "a".repeat(80);
        let first = name("server", &format!("{long}_one"));
        let second = name("server", &format!("{long}_two"));
        assert!(valid(&first) && valid(&second), "{first} {second}");
        assert_eq!(first.len(), MAX_NAME_LEN);
        assert_ne!(first, second);
        assert_eq!(first, name("server", &format!("{long}_one")), "stable");
    }

    #[test]
    fn empty_names_still_make_a_name() {
        assert!(valid(&name("", "")));
    }
}
