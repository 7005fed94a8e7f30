//! Server-sent events as the providers frame them, and the splitting of text into the
//! small deltas a real model streams.

use serde_json::Value;

/// One SSE event: an optional `event:` name and one `data:` line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// A `data:`-only event (Chat Completions style).
    pub fn data(value: &Value) -> SseEvent {
        SseEvent { event: None, data: value.to_string() }
    }

    /// A named event whose name is also the data's `type` (Responses, Anthropic).
    pub fn typed(value: &Value) -> SseEvent {
        let event = value.get("type").and_then(Value::as_str).map(str::to_owned);
        SseEvent { event, data: value.to_string() }
    }

    /// The bytes on the wire, blank line included.
    pub fn encode(&self) -> Vec<u8> {
        let mut text = String::new();
        if let Some(event) = &self.event {
            text.push_str("event: ");
            text.push_str(event);
            text.push('\n');
        }
        text.push_str("data: ");
        text.push_str(&self.data);
        text.push_str("\n\n");
        text.into_bytes()
    }

    /// The same event with its data cut in half: never valid JSON, since the data of
    /// every event is an object (or `[DONE]`, which loses its bracket).
    pub fn malformed(&self) -> SseEvent {
        let mut cut = self.data.len() / 2;
        while !self.data.is_char_boundary(cut) {
            cut -= 1;
        }
        SseEvent { event: self.event.clone(), data: format!("{}\u{fffd}", &self.data[..cut]) }
    }
}

/// Longest text delta, in chars: words longer than this are split further.
const MAX_TEXT_DELTA_CHARS: usize = 8;
/// Longest tool-argument delta, in chars.
const MAX_ARGUMENT_DELTA_CHARS: usize = 6;

/// Splits text into word-sized deltas (each word with the whitespace before it), longer
/// words into pieces; concatenated they give back the text exactly.
pub(crate) fn text_deltas(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for character in text.chars() {
        let is_space = character.is_whitespace();
        if is_space && in_word {
            words.push(std::mem::take(&mut current));
        }
        in_word = !is_space;
        current.push(character);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words.iter().flat_map(|word| char_pieces(word, MAX_TEXT_DELTA_CHARS)).collect()
}

/// Splits tool arguments into at least two pieces when they have two chars or more,
/// so clients must join argument deltas.
pub(crate) fn argument_deltas(arguments: &str) -> Vec<String> {
    let chars = arguments.chars().count();
    let size = chars.div_ceil(2).clamp(1, MAX_ARGUMENT_DELTA_CHARS);
    char_pieces(arguments, size)
}

fn char_pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size.max(1)).map(|piece| piece.iter().collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_deltas_rejoin_exactly() {
        for text in [
            "Hello there, world!",
            "  lead and trail  ",
            "a\nb\n\nc",
            "supercalifragilistic",
            "é ü 日本語のテキスト",
        ] {
            let deltas = text_deltas(text);
            assert_eq!(deltas.concat(), text);
            assert!(deltas.iter().all(|delta| !delta.is_empty()));
        }
        assert_eq!(text_deltas("Hello there world"), ["Hello", " there", " world"]);
    }

    #[test]
    fn argument_deltas_split_in_several_pieces() {
        let arguments = r#"{"command":"ls -la"}"#;
        let deltas = argument_deltas(arguments);
        assert!(deltas.len() >= 3, "{deltas:?}");
        assert_eq!(deltas.concat(), arguments);
        assert_eq!(argument_deltas("{}"), ["{", "}"]);
        assert!(argument_deltas("").is_empty());
    }

    #[test]
    fn malformed_event_is_not_json() {
        let event = SseEvent::data(&serde_json::json!({"a": "ü", "b": [1, 2]}));
        let broken = event.malformed();
        assert!(serde_json::from_str::<Value>(&broken.data).is_err());
    }
}
