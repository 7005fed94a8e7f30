//! After a run that merged everything: its worktrees go (the integration branch stays,
//! the task branches are deleted: they are merged). A failed run keeps them to look at.

use crate::context::Run;
use kestrel_protocol::swarm::task_branch;

pub async fn remove_worktrees(run: &Run) {
    let graph = run.graph();
    for task in &graph.tasks {
        let _ = run.repo.remove_worktree(&run.workdir.join(&task.id)).await;
        let _ = run.repo.run(&["branch", "-D", &task_branch(&run.id, &task.id)]).await;
    }
    let _ = run.repo.remove_worktree(&crate::merge::integration_dir(run)).await;
    let _ = run.repo.remove_worktree(&run.workdir.join(".plan")).await;
    let _ = std::fs::remove_dir_all(run.workdir.join(".verify"));
    // Empty now; a directory still holding something is left alone.
    let _ = std::fs::remove_dir(&run.workdir);
}
