//! A loopback server for model catalogs: answers every GET with one JSON body and counts
//! requests. Dropping it closes the port (the server is "gone").

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Prices per million tokens of `scripted/test-model` in [`CATALOG`].
pub const INPUT_PRICE: f64 = 2.0;
pub const CACHED_PRICE: f64 = 0.5;
pub const OUTPUT_PRICE: f64 = 8.0;
pub const CONTEXT_WINDOW: u64 = 64_000;

/// A catalog in the models.dev shape that prices the scripted provider's `test-model`.
pub const CATALOG: &str = r#"{
  "scripted": {"id": "scripted", "name": "Scripted", "env": ["KESTREL_TEST_SCRIPTED_KEY"], "models": {
    "test-model": {"id": "test-model", "name": "Test Model", "reasoning": true, "tool_call": true,
                   "cost": {"input": 2.0, "output": 8.0, "cache_read": 0.5},
                   "limit": {"context": 64000, "output": 4096}}
  }}
}"#;

pub struct CatalogServer {
    pub url: String,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    address: SocketAddr,
}

impl CatalogServer {
    pub fn start(body: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let (hits, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (thread_hits, thread_stop, body) = (hits.clone(), stop.clone(), body.to_owned());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line != "\r\n" {
                    line.clear();
                }
                thread_hits.fetch_add(1, Ordering::AcqRel);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Self { url: format!("http://{address}/api.json"), hits, stop, address }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::Acquire)
    }
}

impl Drop for CatalogServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(self.address);
    }
}

/// What a request with these counts costs at [`CATALOG`]'s prices.
pub fn cost(input: u64, cached: u64, output: u64) -> f64 {
    ((input - cached) as f64 * INPUT_PRICE
        + cached as f64 * CACHED_PRICE
        + output as f64 * OUTPUT_PRICE)
        / 1e6
}
