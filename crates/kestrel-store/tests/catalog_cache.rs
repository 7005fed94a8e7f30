//! The model catalog cache: written atomically (0600, under a lock), read back, absent
//! reads as none, a corrupt file is a clear error, and a held lock times out.

// Helpers outside #[test] fns are test code too: a failed set-up should panic.
#![allow(clippy::unwrap_used)]

mod common;

use common::home;
use kestrel_store::{CachedCatalog, CatalogCache, CatalogCacheError};
use std::time::Duration;

type Entry = CachedCatalog<serde_json::Value>;

#[test]
fn a_written_catalog_reads_back_and_absence_is_none() {
    let (_dir, home) = home();
    let cache = CatalogCache::new(&home);
    assert_eq!(cache.path(), home.cache_dir().join("catalog.json"));
    assert!(cache.read::<serde_json::Value>().unwrap().is_none());

    let entry = Entry::fetched_now("http://127.0.0.1:9/api.json", serde_json::json!({"a": 1}));
    cache.write(&entry).unwrap();
    let read: Entry = cache.read().unwrap().unwrap();
    assert_eq!(read, entry);
    assert!(read.age() < Duration::from_secs(60));

    let second = Entry::fetched_now("u2", serde_json::json!({"b": 2}));
    cache.write(&second).unwrap();
    assert_eq!(cache.read::<serde_json::Value>().unwrap().unwrap(), second);
    let names: Vec<_> = std::fs::read_dir(home.cache_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["catalog.json", "catalog.lock"], "no temporary file is left behind");
}

#[cfg(unix)]
#[test]
fn the_cache_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, home) = home();
    let cache = CatalogCache::new(&home);
    cache.write(&Entry::fetched_now("u", serde_json::json!({}))).unwrap();
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode();
    assert_eq!(mode(&cache.path()) & 0o777, 0o600);
    assert_eq!(mode(&home.cache_dir()) & 0o777, 0o700);
}

#[test]
fn a_corrupt_cache_is_an_error_naming_the_file() {
    let (_dir, home) = home();
    let cache = CatalogCache::new(&home);
    std::fs::create_dir_all(home.cache_dir()).unwrap();
    for text in ["{\"url\": \"u\", \"fetched_at\": 1, \"catal", "<html>", "{\"catalog\": {}}"] {
        std::fs::write(cache.path(), text).unwrap();
        let error = cache.read::<serde_json::Value>().unwrap_err();
        assert!(matches!(error, CatalogCacheError::Corrupt { .. }), "{error}");
        assert!(error.to_string().contains("catalog.json"), "{error}");
    }
    // A write replaces it.
    cache.write(&Entry::fetched_now("u", serde_json::json!({}))).unwrap();
    assert!(cache.read::<serde_json::Value>().unwrap().is_some());
}

#[test]
fn orphaned_temporary_files_are_cleaned_up_by_the_next_write() {
    let (_dir, home) = home();
    let cache = CatalogCache::new(&home);
    std::fs::create_dir_all(home.cache_dir()).unwrap();
    let orphan = home.cache_dir().join(".catalog.json.99999.0.tmp");
    std::fs::write(&orphan, "half").unwrap();
    cache.write(&Entry::fetched_now("u", serde_json::json!({}))).unwrap();
    assert!(!orphan.exists());
}

#[test]
fn a_writer_gives_up_when_the_lock_is_held_too_long() {
    let (_dir, home) = home();
    let cache = CatalogCache::new(&home);
    cache.write(&Entry::fetched_now("u", serde_json::json!({"old": true}))).unwrap();
    let holder = std::fs::OpenOptions::new().write(true).open(cache.lock_path()).unwrap();
    holder.lock().unwrap();
    let error = cache.write(&Entry::fetched_now("u", serde_json::json!({}))).unwrap_err();
    assert!(matches!(error, CatalogCacheError::Busy { .. }), "{error}");
    assert_eq!(
        cache.read::<serde_json::Value>().unwrap().unwrap().catalog,
        serde_json::json!({"old": true}),
        "the cache is untouched"
    );
    drop(holder);
    cache.write(&Entry::fetched_now("u", serde_json::json!({}))).unwrap();
}

#[test]
fn concurrent_writers_leave_one_whole_catalog() {
    let (_dir, home) = home();
    let threads: Vec<_> = (0..6)
        .map(|n| {
            let home = home.clone();
            std::thread::spawn(move || {
                let cache = CatalogCache::new(&home);
                let big: Vec<u64> = (0..5_000).map(|i| i * n).collect();
                cache.write(&Entry::fetched_now(format!("u{n}"), serde_json::json!(big))).unwrap();
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let read: Entry = CatalogCache::new(&home).read().unwrap().unwrap();
    let n: u64 = read.url[1..].parse().unwrap();
    assert_eq!(read.catalog.as_array().unwrap().len(), 5_000);
    assert_eq!(read.catalog[1], serde_json::json!(n));
}
