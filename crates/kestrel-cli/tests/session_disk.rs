//! Disk that does not grow forever: `kestrel sessions` shows what each session uses,
//! `kestrel sessions rm` removes sessions (never a live one, in a worker or served by
//! the daemon between workers), and every run cleans up checkpoint data past
//! `[storage] checkpoint_days` or over the size cap.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;
mod daemon_support;

use common::{TestEnv, Wire, stderr, stdout};
use daemon_support::{DaemonTest, eventually, kill};
use kestrel_protocol::{
    RECORD_VERSION, RecordEntry, RecordHeader, RecordItem, SessionId, Timestamp,
};
use kestrel_store::{KestrelHome, SessionIndex, SessionRecord};
use kestrel_testkit::{Script, Step};
use std::path::PathBuf;

const DAY: i64 = 24 * 3600 * 1000;

fn home(env: &TestEnv) -> KestrelHome {
    KestrelHome::at(env.home.path())
}

/// A closed session last used `days_ago` days ago, with 5 kB of checkpoint data.
fn old_session(env: &TestEnv, id: &str, days_ago: i64) -> PathBuf {
    let home = home(env);
    let created_at = Timestamp { millis: Timestamp::now().millis - days_ago * DAY };
    let header = RecordHeader {
        id: SessionId::from_string(id),
        version: RECORD_VERSION,
        created_at,
        cwd: env.work_path().display().to_string(),
        provider: "scripted".into(),
        model: "test-model".into(),
        parent_id: None,
        forked_from: None,
        swarm: None,
        repository: None,
    };
    let mut record = SessionRecord::create(&home, header).unwrap();
    let ts = Timestamp { millis: created_at.millis + 1 };
    record
        .append(&RecordEntry { ts, item: RecordItem::UserMessage { text: format!("task {id}") } })
        .unwrap();
    let blobs = home.checkpoints_dir().join(id).join("blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::write(blobs.join("x"), vec![1u8; 5_000]).unwrap();
    record.path().to_path_buf()
}

fn listed_ids(env: &TestEnv) -> Vec<String> {
    let mut ids: Vec<String> = SessionIndex::list(&home(env))
        .unwrap()
        .into_iter()
        .map(|session| session.id.to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn sessions_shows_the_disk_each_session_uses() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    old_session(&env, "sized", 1);
    let table = env.kestrel(&["sessions"]);
    assert!(table.status.success(), "{}", stderr(&table));
    let line = stdout(&table);
    assert!(line.contains("sized") && line.contains(" kB "), "{line}");
    let json = env.kestrel(&["sessions", "--json"]);
    let value: serde_json::Value =
        serde_json::from_str(stdout(&json).lines().next().unwrap()).unwrap();
    let bytes = value["disk_bytes"].as_u64().unwrap();
    assert!(bytes > 5_000, "record and checkpoints: {value}");
}

#[test]
fn rm_removes_a_session_and_its_checkpoints_and_keeps_the_index_consistent() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let gone = old_session(&env, "gone-one", 1);
    old_session(&env, "kept-one", 1);
    let output = env.kestrel(&["sessions", "rm", "gone"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).starts_with("removed gone-one ("), "{}", stdout(&output));
    assert!(!gone.exists());
    assert!(!home(&env).checkpoints_dir().join("gone-one").exists());
    assert!(home(&env).checkpoints_dir().join("kept-one").exists());
    assert_eq!(listed_ids(&env), ["kept-one"]);
    // A rebuild from the records says the same.
    std::fs::remove_file(home(&env).index_file()).unwrap();
    assert_eq!(listed_ids(&env), ["kept-one"]);
    assert!(!stdout(&env.kestrel(&["sessions"])).contains("gone-one"));
}

#[test]
fn rm_of_a_live_session_is_refused_and_nothing_is_lost() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let live = old_session(&env, "live-one", 1);
    let other = old_session(&env, "other-one", 1);
    let (_worker, _replay) =
        SessionRecord::open(&home(&env), &SessionId::from_string("live-one")).unwrap();
    let output = env.kestrel(&["sessions", "rm", "other-one", "live-one"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(message.contains("session live-one is open in a worker"), "{message}");
    assert!(message.contains("nothing was removed"), "{message}");
    assert!(live.exists() && other.exists());
    assert!(home(&env).checkpoints_dir().join("live-one").exists());
    assert_eq!(listed_ids(&env), ["live-one", "other-one"]);
}

#[test]
fn rm_of_an_unknown_id_is_a_clear_error() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    let kept = old_session(&env, "known-one", 1);
    let output = env.kestrel(&["sessions", "rm", "known-one", "no-such-id"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(stderr(&output).contains("no session matches `no-such-id`"), "{}", stderr(&output));
    assert!(kept.exists());
    let nothing = env.kestrel(&["sessions", "rm"]);
    assert_eq!(nothing.status.code(), Some(2), "ids or --older-than are needed");
}

#[test]
fn rm_older_than_removes_idle_sessions_only() {
    let env = TestEnv::new(Wire::Chat, Script::default());
    old_session(&env, "ancient", 90);
    old_session(&env, "ancient-live", 90);
    old_session(&env, "fresh", 2);
    let (_worker, _replay) =
        SessionRecord::open(&home(&env), &SessionId::from_string("ancient-live")).unwrap();
    let output = env.kestrel(&["sessions", "rm", "--older-than", "30"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("removed ancient ("), "{}", stdout(&output));
    assert_eq!(listed_ids(&env), ["ancient-live", "fresh"]);
}

#[test]
fn a_run_cleans_up_old_checkpoints_but_keeps_recent_and_live_ones() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("done")]));
    let old = old_session(&env, "old-one", 40);
    old_session(&env, "old-live", 40);
    old_session(&env, "recent-one", 3);
    let (_worker, _replay) =
        SessionRecord::open(&home(&env), &SessionId::from_string("old-live")).unwrap();
    let output = env.kestrel(&["exec", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let checkpoints = home(&env).checkpoints_dir();
    assert!(!checkpoints.join("old-one").exists(), "past checkpoint_days (30)");
    assert!(checkpoints.join("old-live").exists(), "a live session's is never touched");
    assert!(checkpoints.join("recent-one").exists());
    assert!(old.exists(), "the session itself stays");
}

#[test]
fn checkpoint_days_is_read_from_the_config() {
    let env = TestEnv::new(Wire::Chat, Script::new([Step::text("done")]));
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n[storage]\ncheckpoint_days = 2\n"));
    old_session(&env, "three-days", 3);
    let output = env.kestrel(&["exec", "hi"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!home(&env).checkpoints_dir().join("three-days").exists());
    env.write_config(&format!("{config}\n[storage]\ncheckpoint_days = 0\n"));
    let refused = env.kestrel(&["exec", "hi"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("`[storage] checkpoint_days` must be at least 1"),
        "{}",
        stderr(&refused)
    );
}

/// Sends SIGCONT to a process stopped by the test, however the test ends.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        kill(self.0, libc::SIGCONT);
    }
}

/// A session the daemon serves, with old checkpoint data over the size cap: a run's
/// clean-up leaves it alone and `sessions rm` refuses it, while its worker has it open
/// and also between two workers (the worker killed while the daemon cannot restart it
/// yet: nothing has the record open, only the daemon's hold says it is live).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_daemon_serves_survives_clean_up_and_rm_even_between_workers() {
    let test = DaemonTest::new(Script::new([Step::text("done"), Step::text("done")]));
    let env = &test.env;
    let cwd = env.work_path();
    old_session(env, "served", 90);
    let data = home(env).checkpoints_dir().join("served");
    std::fs::write(data.join("blobs").join("big"), vec![1u8; 2_000_000]).unwrap();
    let config = std::fs::read_to_string(env.home.path().join("config.toml")).unwrap();
    env.write_config(&format!("{config}\n[storage]\ncheckpoint_max_mb = 1\n"));
    let client = test.client().await;
    client.load("served", &cwd).await.expect("the daemon loads the session");
    let worker = test.wait_worker_pid("served", None);

    let check = |when: &str, idle: &str| {
        // An old session no one serves: the clean-up must remove its data in the same
        // run, or it did not run at all.
        old_session(env, idle, 90);
        let idle_data = home(env).checkpoints_dir().join(idle);
        // The clean-up runs at most hourly: make it due.
        let _ = std::fs::remove_file(home(env).checkpoints_dir().join(".cleaned"));
        let run = test.command(&["exec", "hi"]).output().unwrap();
        assert!(run.status.success(), "{when}: {}", stderr(&run));
        assert!(!idle_data.exists(), "{when}: the clean-up did not run");
        assert!(data.join("blobs").join("big").exists(), "{when}: clean-up removed its data");
        let rm = test.command(&["sessions", "rm", "served"]).output().unwrap();
        assert_eq!(rm.status.code(), Some(1), "{when}: {}", stderr(&rm));
        let message = stderr(&rm);
        assert!(message.contains("session served is open in a worker"), "{when}: {message}");
        assert!(message.contains("nothing was removed"), "{when}: {message}");
        assert!(listed_ids(env).contains(&"served".to_owned()), "{when}");
    };
    check("with its worker", "idle-1");

    let daemon = test.daemon_pid().expect("the daemon runs");
    kill(daemon, libc::SIGSTOP);
    let _resume = Resume(daemon);
    kill(worker as u32, libc::SIGKILL);
    // The record's lock went with the worker (a brief open here shows it is free).
    let id = SessionId::from_string("served");
    eventually("the killed worker's lock to go", || SessionRecord::open(&home(env), &id).is_ok())
        .await;
    check("between two workers", "idle-2");

    kill(daemon, libc::SIGCONT);
    let restarted = test.wait_worker_pid("served", Some(worker));
    assert_ne!(restarted, worker);
}
