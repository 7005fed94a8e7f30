//! Credentials in the environment: variables whose names say they hold one stay out of
//! commands whose output reaches a model, a session record or a log (the shell tool,
//! the swarm's verifier). One rule, so every such command hides the same variables.

use tokio::process::Command;

/// Whether an environment variable's name says it holds a credential (the same rule as
/// Codex's default shell environment policy: KEY, SECRET or TOKEN, plus PASSWORD).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "SECRET", "TOKEN", "PASSWORD", "PASSWD"].iter().any(|word| upper.contains(word))
}

/// Removes from `command`'s environment every variable of this process that it would
/// inherit and whose name [`is_secret_name`] flags, or is not UTF-8 (it cannot be
/// checked). Variables set on `command` itself under another name stay.
pub fn remove_secret_variables(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_none_or(is_secret_name) {
            command.env_remove(&name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_keys_tokens_and_passwords_are_secret_and_others_not() {
        for name in ["OPENAI_API_KEY", "gh_token", "AWS_SECRET_ACCESS_KEY", "DB_PASSWD", "PASSWORD"]
        {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "CARGO_TARGET_DIR", "LANG"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
