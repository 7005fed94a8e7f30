//! A task graph as TOML (`--graph FILE`, a run's `graph.toml`): read strictly (unknown
//! keys are errors with a position), then checked with the protocol's validation so every
//! reader gives the same reasons.

use crate::config::line_column;
use kestrel_protocol::swarm::SwarmGraph;

/// Why a graph cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// Not valid TOML, an unknown key or a value of the wrong type.
    #[error("line {line}, column {column}: {message}")]
    Toml { line: usize, column: usize, message: String },

    /// Well formed, but the graph cannot run: every reason, in a stable order.
    #[error("the task graph cannot run:{}", problems.iter().map(|p| format!("\n  - {p}")).collect::<String>())]
    Problems { problems: Vec<String> },
}

/// Reads a task graph and checks it: at least one task, well-formed unique ids, titles,
/// acceptance commands, known dependencies and no cycle.
///
/// Fails with [`GraphError::Toml`] (with its line and column) or
/// [`GraphError::Problems`] listing every problem found.
pub fn parse_graph(text: &str) -> Result<SwarmGraph, GraphError> {
    let graph = read_graph(text)?;
    let problems = graph.problems();
    if problems.is_empty() { Ok(graph) } else { Err(GraphError::Problems { problems }) }
}

/// The TOML reading alone: a GOAL run's graph before its plan holds only the goal.
pub(super) fn read_graph(text: &str) -> Result<SwarmGraph, GraphError> {
    toml::from_str::<SwarmGraph>(text).map_err(|error| {
        let (line, column) =
            error.span().map_or((1, 1), |span| line_column(text, span.start.min(text.len())));
        GraphError::Toml { line, column, message: error.message().trim().to_owned() }
    })
}

/// The graph as TOML, as `write_graph` stores it and a person reads it (a planner's
/// graph shown for confirmation, saved for `--graph FILE`).
///
/// Fails, with the serialiser's message, only on a value TOML cannot hold.
pub fn graph_to_toml(graph: &SwarmGraph) -> Result<String, String> {
    toml::to_string(graph).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRAPH: &str = r#"
goal = "Add a config loader"
base = "main"
setup = ["pip install -e ."]

[[task]]
id = "parse"
title = "Parse the config file"
description = """What to build, precisely."""
depends_on = []
acceptance = ["python3 -m pytest -q tests/test_parse.py"]
files = ["src/config.py"]

[[task]]
id = "load"
title = "Load it"
depends_on = ["parse"]
acceptance = ["true"]
"#;

    #[test]
    fn a_documented_graph_parses_and_survives_a_round_trip() {
        let graph = parse_graph(GRAPH).unwrap();
        assert_eq!(graph.goal.as_deref(), Some("Add a config loader"));
        assert_eq!(graph.order(), ["parse", "load"]);
        let text = graph_to_toml(&graph).unwrap();
        assert_eq!(parse_graph(&text).unwrap(), graph);
    }

    #[test]
    fn an_unknown_key_names_its_line_and_column() {
        let text = GRAPH.replace("files = ", "filez = ");
        let error = parse_graph(&text).unwrap_err();
        assert!(
            matches!(&error, GraphError::Toml { line: 12, column: 1, message } if message.contains("unknown field `filez`")),
            "{error:?}"
        );
        assert!(
            error.to_string().starts_with("line 12, column 1: unknown field `filez`"),
            "{error}"
        );
    }

    #[test]
    fn every_problem_is_listed() {
        let text = GRAPH.replace("depends_on = []", "depends_on = [\"load\"]").replace(
            "acceptance = [\"true\"]",
            "acceptance = []\n[[task]]\nid = \"Bad\"\ntitle = \"x\"\nacceptance = [\"true\"]",
        );
        let error = parse_graph(&text).unwrap_err();
        let GraphError::Problems { problems } = &error else { panic!("{error:?}") };
        assert_eq!(problems.len(), 3, "{problems:?}");
        let message = error.to_string();
        assert!(message.starts_with("the task graph cannot run:\n  - "), "{message}");
        assert!(message.contains("`Bad` is not valid"), "{message}");
        assert!(message.contains("`load` has no acceptance"), "{message}");
        assert!(message.contains("cycle"), "{message}");
    }
}
