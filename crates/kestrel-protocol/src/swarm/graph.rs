//! The task graph of a swarm run (ARCHITECTURE §10): what `--graph FILE` holds and what a
//! planner's `swarm_plan` call sends. Validation is pure, so the orchestrator, the store
//! and the planner's tool give the same reasons for the same graph.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A whole graph file: `goal`, `base`, `setup` and the `[[task]]` tables.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmGraph {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// The branch to build on; `None`: the repository's current branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Commands run in every fresh clone before the acceptance commands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    #[serde(default, rename = "task")]
    pub tasks: Vec<TaskSpec>,
}

/// One task of the graph.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// `[a-z0-9-]`, unique in the graph; part of branch names.
    pub id: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Commands that must each exit 0 in a fresh clone of the task's commit.
    #[serde(default)]
    pub acceptance: Vec<String>,
    /// Hints: tasks sharing a file never run at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// The arguments of the planner's `swarm_plan` tool.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwarmPlan {
    pub tasks: Vec<TaskSpec>,
}

/// The longest task id (it becomes part of a branch and a directory name).
pub const MAX_TASK_ID_LEN: usize = 64;

impl SwarmGraph {
    /// Every reason the graph cannot run, in a stable order; empty when it can. Checks:
    /// at least one task; ids well formed and unique; titles and acceptance commands
    /// present; dependencies known and not cyclic (the cycle is named).
    pub fn problems(&self) -> Vec<String> {
        validate_tasks(&self.tasks)
    }

    /// The task called `id`.
    pub fn task(&self, id: &str) -> Option<&TaskSpec> {
        self.tasks.iter().find(|task| task.id == id)
    }

    /// Task ids in an order where every task comes after its dependencies (ties in
    /// graph order). Only meaningful for a graph without problems; a cycle's members are
    /// left out.
    pub fn order(&self) -> Vec<String> {
        let mut done: BTreeSet<&str> = BTreeSet::new();
        let mut order = Vec::new();
        loop {
            let next = self.tasks.iter().find(|task| {
                !done.contains(task.id.as_str())
                    && task.depends_on.iter().all(|dep| done.contains(dep.as_str()))
            });
            let Some(task) = next else { break };
            done.insert(&task.id);
            order.push(task.id.clone());
        }
        order
    }

    /// The tasks that depend on `id`, directly or not, in graph order.
    pub fn dependents(&self, id: &str) -> Vec<String> {
        let mut found: BTreeSet<String> = BTreeSet::new();
        let mut frontier = vec![id.to_string()];
        while let Some(current) = frontier.pop() {
            for task in &self.tasks {
                if task.depends_on.contains(&current) && found.insert(task.id.clone()) {
                    frontier.push(task.id.clone());
                }
            }
        }
        self.tasks.iter().filter(|t| found.contains(&t.id)).map(|t| t.id.clone()).collect()
    }
}

impl SwarmPlan {
    /// See [`SwarmGraph::problems`].
    pub fn problems(&self) -> Vec<String> {
        validate_tasks(&self.tasks)
    }
}

/// Whether `id` is a usable task id: 1..=64 of `[a-z0-9-]`, not starting with `-`.
pub fn valid_task_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_TASK_ID_LEN
        && !id.starts_with('-')
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn validate_tasks(tasks: &[TaskSpec]) -> Vec<String> {
    let mut problems = Vec::new();
    if tasks.is_empty() {
        problems.push("the graph has no tasks".to_string());
        return problems;
    }
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for task in tasks {
        if !valid_task_id(&task.id) {
            problems.push(format!(
                "task id `{}` is not valid: use 1 to {MAX_TASK_ID_LEN} of a-z, 0-9 and `-`, \
                 not starting with `-`",
                task.id
            ));
        }
        if !seen.insert(&task.id) {
            problems.push(format!("task id `{}` is used twice", task.id));
        }
        if task.title.trim().is_empty() {
            problems.push(format!("task `{}` has no title", task.id));
        }
        if task.acceptance.iter().all(|command| command.trim().is_empty()) {
            problems.push(format!(
                "task `{}` has no acceptance commands (each must exit 0 when the task is done)",
                task.id
            ));
        }
    }
    for task in tasks {
        for dep in &task.depends_on {
            if dep == &task.id {
                problems.push(format!("task `{}` depends on itself", task.id));
            } else if !seen.contains(dep.as_str()) {
                problems.push(format!("task `{}` depends on unknown task `{dep}`", task.id));
            }
        }
    }
    if let Some(cycle) = find_cycle(tasks) {
        problems.push(format!("the dependencies form a cycle: {}", cycle.join(" -> ")));
    }
    problems
}

/// One dependency cycle (`a -> b -> a`), if any; self-dependencies are reported apart.
fn find_cycle(tasks: &[TaskSpec]) -> Option<Vec<String>> {
    let edges: BTreeMap<&str, Vec<&str>> = tasks
        .iter()
        .map(|task| {
            let deps = task
                .depends_on
                .iter()
                .map(String::as_str)
                .filter(|dep| *dep != task.id && tasks.iter().any(|t| t.id == *dep))
                .collect();
            (task.id.as_str(), deps)
        })
        .collect();
    // 0 unseen, 1 on the current path, 2 finished.
    let mut marks: BTreeMap<&str, u8> = BTreeMap::new();
    for start in edges.keys() {
        let mut path: Vec<&str> = Vec::new();
        if let Some(cycle) = visit(start, &edges, &mut marks, &mut path) {
            return Some(cycle);
        }
    }
    None
}

fn visit<'a>(
    node: &'a str,
    edges: &BTreeMap<&'a str, Vec<&'a str>>,
    marks: &mut BTreeMap<&'a str, u8>,
    path: &mut Vec<&'a str>,
) -> Option<Vec<String>> {
    match marks.get(node).copied().unwrap_or(0) {
        2 => return None,
        1 => {
            let from = path.iter().position(|step| *step == node).unwrap_or(0);
            let mut cycle: Vec<String> = path[from..].iter().map(|s| s.to_string()).collect();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        _ => {}
    }
    marks.insert(node, 1);
    path.push(node);
    for next in edges.get(node).map(Vec::as_slice).unwrap_or_default() {
        if let Some(cycle) = visit(next, edges, marks, path) {
            return Some(cycle);
        }
    }
    path.pop();
    marks.insert(node, 2);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            title: format!("do {id}"),
            description: String::new(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            acceptance: vec!["true".into()],
            files: Vec::new(),
        }
    }

    fn graph(tasks: Vec<TaskSpec>) -> SwarmGraph {
        SwarmGraph { tasks, ..SwarmGraph::default() }
    }

    #[test]
    fn a_valid_graph_has_no_problems_and_orders_dependencies_first() {
        let g = graph(vec![task("c", &["b"]), task("a", &[]), task("b", &["a"])]);
        assert!(g.problems().is_empty(), "{:?}", g.problems());
        assert_eq!(g.order(), ["a", "b", "c"]);
        assert_eq!(g.dependents("a"), ["c", "b"]);
    }

    #[test]
    fn cycles_unknown_duplicate_and_bad_ids_are_all_named() {
        let mut no_acceptance = task("d", &[]);
        no_acceptance.acceptance = vec![" ".into()];
        let g = graph(vec![
            task("a", &["b"]),
            task("b", &["a"]),
            task("x", &[]),
            task("x", &[]),
            task("Bad_Id", &["ghost"]),
            no_acceptance,
            task("s", &["s"]),
        ]);
        let problems = g.problems().join("\n");
        assert!(problems.contains("`x` is used twice"), "{problems}");
        assert!(problems.contains("`Bad_Id` is not valid"), "{problems}");
        assert!(problems.contains("unknown task `ghost`"), "{problems}");
        assert!(problems.contains("`d` has no acceptance"), "{problems}");
        assert!(problems.contains("`s` depends on itself"), "{problems}");
        assert!(problems.contains("cycle: a -> b -> a"), "{problems}");
    }

    #[test]
    fn an_empty_graph_is_refused() {
        assert_eq!(graph(Vec::new()).problems(), ["the graph has no tasks"]);
    }

    #[test]
    fn ids_are_branch_safe() {
        assert!(valid_task_id("parse-2"));
        for bad in ["", "-x", "a/b", "a b", "A", "a..b", &"x".repeat(65)] {
            assert!(!valid_task_id(bad), "{bad}");
        }
    }
}
