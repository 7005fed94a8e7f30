//! Slash commands: the built-in ones, custom ones from `.md` files
//! (`.kestrel/commands/` of the project, `$KESTREL_HOME/commands/`), and the completion
//! menu's matching. A custom command's file is a prompt template; `$ARGUMENTS` is
//! replaced by what follows the command (appended when the template has no placeholder).

use crate::event::CustomCommand;
use crate::fuzzy;
use std::path::{Path, PathBuf};

/// The built-in commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Help,
    Model,
    Mode,
    New,
    Resume,
    Sessions,
    Compact,
    Undo,
    Diff,
    Status,
    Cost,
    Init,
    Swarm,
    Quit,
}

impl Builtin {
    pub(crate) const ALL: [Builtin; 14] = [
        Builtin::Help,
        Builtin::Model,
        Builtin::Mode,
        Builtin::New,
        Builtin::Resume,
        Builtin::Sessions,
        Builtin::Compact,
        Builtin::Undo,
        Builtin::Diff,
        Builtin::Status,
        Builtin::Cost,
        Builtin::Init,
        Builtin::Swarm,
        Builtin::Quit,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Builtin::Help => "help",
            Builtin::Model => "model",
            Builtin::Mode => "mode",
            Builtin::New => "new",
            Builtin::Resume => "resume",
            Builtin::Sessions => "sessions",
            Builtin::Compact => "compact",
            Builtin::Undo => "undo",
            Builtin::Diff => "diff",
            Builtin::Status => "status",
            Builtin::Cost => "cost",
            Builtin::Init => "init",
            Builtin::Swarm => "swarm",
            Builtin::Quit => "quit",
        }
    }

    pub(crate) fn description(self) -> &'static str {
        match self {
            Builtin::Help => "show commands and keys",
            Builtin::Model => "choose the model",
            Builtin::Mode => "choose what runs without asking",
            Builtin::New => "start a new session",
            Builtin::Resume => "resume an earlier session",
            Builtin::Sessions => "browse all sessions, subagents included",
            Builtin::Compact => "summarise the conversation to free context",
            Builtin::Undo => "undo the last turn's file changes",
            Builtin::Diff => "show uncommitted changes (git diff)",
            Builtin::Status => "session, model, mode, context and daemon state",
            Builtin::Cost => "tokens and cost of this session",
            Builtin::Init => "write a starter AGENTS.md",
            Builtin::Swarm => "swarm runs: tasks, states, costs; open a task's session",
            Builtin::Quit => "exit Kestrel",
        }
    }
}

/// A command the menu offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SlashCommand {
    Builtin(Builtin),
    /// Index into the custom commands.
    Custom(usize),
}

/// One line of the completion menu.
#[derive(Debug, Clone)]
pub(crate) struct MenuItem {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) command: SlashCommand,
}

/// Every command, built-ins first.
pub(crate) fn all(custom: &[CustomCommand]) -> Vec<MenuItem> {
    let mut items: Vec<MenuItem> = Builtin::ALL
        .iter()
        .map(|builtin| MenuItem {
            name: builtin.name().to_owned(),
            description: builtin.description().to_owned(),
            command: SlashCommand::Builtin(*builtin),
        })
        .collect();
    for (index, command) in custom.iter().enumerate() {
        if Builtin::ALL.iter().any(|builtin| builtin.name() == command.name) {
            continue;
        }
        items.push(MenuItem {
            name: command.name.clone(),
            description: command.description.clone(),
            command: SlashCommand::Custom(index),
        });
    }
    items
}

/// The commands matching what was typed after `/`: prefixes first, then fuzzy matches.
pub(crate) fn matching(query: &str, custom: &[CustomCommand]) -> Vec<MenuItem> {
    let items = all(custom);
    let (mut prefixed, rest): (Vec<MenuItem>, Vec<MenuItem>) =
        items.into_iter().partition(|item| item.name.starts_with(query));
    let ranked = fuzzy::rank(query, rest.iter().map(|item| item.name.as_str()), usize::MAX);
    prefixed.extend(ranked.into_iter().filter_map(|index| rest.get(index).cloned()));
    prefixed
}

/// Splits `/name args` into the command and its arguments; `None` if the text is not
/// a known command (so `/etc/hosts is odd` is sent as a prompt).
pub(crate) fn parse(text: &str, custom: &[CustomCommand]) -> Option<(SlashCommand, String)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let item = all(custom).into_iter().find(|item| item.name == name)?;
    Some((item.command, args.trim().to_owned()))
}

/// A custom command's prompt for these arguments.
pub(crate) fn expand(template: &str, args: &str) -> String {
    if template.contains("$ARGUMENTS") {
        template.replace("$ARGUMENTS", args)
    } else if args.is_empty() {
        template.to_owned()
    } else {
        format!("{}\n\n{args}", template.trim_end())
    }
}

/// The custom commands of the user and of the project in `cwd` (the project's win on
/// a name clash), sorted by name. Unreadable files are skipped.
pub(crate) fn load_custom(user_dir: &Path, cwd: &Path) -> Vec<CustomCommand> {
    let mut commands: Vec<CustomCommand> = Vec::new();
    let mut dirs = vec![user_dir.to_path_buf()];
    if let Some(project) = project_commands_dir(cwd) {
        dirs.push(project);
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        paths.sort();
        for path in paths {
            if path.extension().is_none_or(|ext| ext != "md") {
                continue;
            }
            let Some(name) = path.file_stem().and_then(|stem| stem.to_str()) else { continue };
            if name.is_empty() || name.contains(char::is_whitespace) {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            let command = parse_command_file(name, &text);
            commands.retain(|known| known.name != command.name);
            commands.push(command);
        }
    }
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    commands
}

/// `.kestrel/commands` in `cwd` or the nearest ancestor that has one, up to the
/// repository root.
fn project_commands_dir(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let candidate = dir.join(".kestrel").join("commands");
        if candidate.is_dir() {
            return Some(candidate);
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    None
}

/// A command file: optional front matter (`---` / `description: ...` / `---`), then the
/// template. Without a description, the template's first line describes it.
fn parse_command_file(name: &str, text: &str) -> CustomCommand {
    let mut description = None;
    let mut template = text;
    if let Some(rest) = text.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---")
    {
        for line in rest[..end].lines() {
            if let Some(value) = line.strip_prefix("description:") {
                description = Some(value.trim().trim_matches('"').to_owned());
            }
        }
        template = rest[end + 4..].trim_start_matches(['\r', '\n']);
    }
    let description = description.unwrap_or_else(|| {
        let first = template.lines().find(|line| !line.trim().is_empty()).unwrap_or_default();
        let first = first.trim().trim_start_matches('#').trim();
        let short: String = first.chars().take(60).collect();
        if short.len() < first.len() { format!("{short}…") } else { short }
    });
    CustomCommand { name: name.to_owned(), description, template: template.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_with_arguments_and_unknown_ones_are_prompts() {
        assert_eq!(parse("/model", &[]), Some((SlashCommand::Builtin(Builtin::Model), "".into())));
        assert_eq!(
            parse("/quit now", &[]).map(|(command, _)| command),
            Some(SlashCommand::Builtin(Builtin::Quit))
        );
        assert_eq!(parse("/etc/hosts is odd", &[]), None);
        assert_eq!(parse("hello", &[]), None);
    }

    #[test]
    fn the_menu_prefers_prefixes_then_fuzzy_matches() {
        let names: Vec<String> = matching("m", &[]).into_iter().map(|item| item.name).collect();
        assert_eq!(names[..2], ["model", "mode"]);
        let names: Vec<String> = matching("sts", &[]).into_iter().map(|item| item.name).collect();
        assert!(names.contains(&"status".to_owned()), "{names:?}");
    }

    #[test]
    fn custom_commands_load_with_front_matter_and_expand_arguments() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let project = work.path().join(".kestrel/commands");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(home.path().join("review.md"), "Review $ARGUMENTS carefully.\n").unwrap();
        std::fs::write(
            project.join("test.md"),
            "---\ndescription: run the tests\n---\nRun the test suite.\n",
        )
        .unwrap();
        std::fs::write(project.join("notes.txt"), "not a command").unwrap();
        let commands = load_custom(home.path(), work.path());
        let names: Vec<&str> = commands.iter().map(|command| command.name.as_str()).collect();
        assert_eq!(names, ["review", "test"]);
        assert_eq!(commands[1].description, "run the tests");
        assert_eq!(commands[0].description, "Review $ARGUMENTS carefully.");
        assert_eq!(expand(&commands[0].template, "main.rs"), "Review main.rs carefully.\n");
        assert_eq!(expand(&commands[1].template, "fast"), "Run the test suite.\n\nfast");
        let (command, args) = parse("/review lib.rs", &commands).unwrap();
        assert_eq!((command, args.as_str()), (SlashCommand::Custom(0), "lib.rs"));
    }
}
