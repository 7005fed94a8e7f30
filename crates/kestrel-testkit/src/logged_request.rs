//! The record of one HTTP request the server received, for tests to assert on.

use serde::{Deserialize, Serialize};

/// One request as it arrived: method, path (with any query), headers and JSON body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    pub method: String,
    /// The request target as sent, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Lower-cased names, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The parsed body; `Null` if it was empty or not JSON.
    pub body: serde_json::Value,
}

impl LoggedRequest {
    /// The first header with this name (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}
