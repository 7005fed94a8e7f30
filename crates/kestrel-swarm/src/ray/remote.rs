//! The run's git remote, as orchestrator and nodes use it: refs pushed and fetched by
//! name, and small commits of files (a job's spec, a task's session records) made without
//! a work tree. Fetches never write FETCH_HEAD and go into refs of their own, so the
//! user's branches and checkout are never moved.

use crate::SwarmError;
use crate::git::Git;

/// Pushes `source` (a commit) to `target` on `remote`; `force` for refs only the
/// orchestrator writes.
pub async fn push(
    repo: &Git,
    remote: &str,
    source: &str,
    target: &str,
    force: bool,
) -> Result<(), SwarmError> {
    let spec = format!("{}{source}:{target}", if force { "+" } else { "" });
    repo.run(&["push", "--quiet", "--no-verify", remote, &spec]).await?;
    Ok(())
}

/// Fetches `source` from `remote` into the local ref `target`; `None` when the remote
/// has no such ref.
pub async fn fetch(
    repo: &Git,
    remote: &str,
    source: &str,
    target: &str,
) -> Result<Option<String>, SwarmError> {
    let (found, _) = repo.output(&["ls-remote", "--exit-code", remote, source]).await?;
    if !found {
        return Ok(None);
    }
    let spec = format!("+{source}:{target}");
    repo.run(&["fetch", "--quiet", "--no-write-fetch-head", "--no-tags", remote, &spec]).await?;
    repo.resolve(target).await
}

/// A commit whose tree is `files` plus (unless replaced) the files of `parent`'s tree;
/// `parent` becomes its parent.
pub async fn commit_files(
    repo: &Git,
    parent: Option<&str>,
    files: &[(String, Vec<u8>)],
    message: &str,
) -> Result<String, SwarmError> {
    let mut entries: Vec<(String, String)> = Vec::new();
    if let Some(parent) = parent {
        let listed = repo.run(&["ls-tree", "-z", parent]).await?.stdout;
        for entry in listed.split('\0').filter(|entry| !entry.is_empty()) {
            let Some((meta, name)) = entry.split_once('\t') else { continue };
            if !files.iter().any(|(file, _)| file == name) {
                entries.push((meta.to_string(), name.to_string()));
            }
        }
    }
    for (name, bytes) in files {
        let blob = repo.run_with_input(&["hash-object", "-w", "--stdin"], bytes).await?;
        entries.push((format!("100644 blob {}", blob.stdout.trim()), name.clone()));
    }
    let mut listing = Vec::new();
    for (meta, name) in &entries {
        listing.extend_from_slice(format!("{meta}\t{name}\0").as_bytes());
    }
    let tree = repo.run_with_input(&["mktree", "-z"], &listing).await?.stdout.trim().to_string();
    let mut args = vec!["commit-tree", tree.as_str(), "-m", message];
    if let Some(parent) = parent {
        args.extend(["-p", parent]);
    }
    let identity = ["-c", "user.name=Kestrel swarm", "-c", "user.email=kestrel-swarm@localhost"];
    let mut full: Vec<&str> = identity.to_vec();
    full.extend(args);
    Ok(repo.run(&full).await?.stdout.trim().to_string())
}

/// One file of a commit's tree; `None` when the tree has no such file.
pub async fn read_file(
    repo: &Git,
    commit: &str,
    name: &str,
) -> Result<Option<Vec<u8>>, SwarmError> {
    let (found, output) = repo.output(&["cat-file", "blob", &format!("{commit}:{name}")]).await?;
    Ok(found.then(|| output.stdout.into_bytes()))
}
