//! A small Server-Sent Events parser: bytes in, `SseEvent`s out. It follows the WHATWG
//! event-stream rules we rely on (`event:`, multi-line `data:`, `:` comments, CR/LF/CRLF
//! line ends) and keeps any partial line or event across chunks.

/// One dispatched event: its `event:` name (empty when none was given) and its data
/// lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Incremental parser; feed it chunks as they arrive.
#[derive(Debug, Default)]
pub(crate) struct SseParser {
    /// Bytes of a line whose end has not arrived yet.
    partial_line: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` starting the next chunk belongs to it.
    after_cr: bool,
    started: bool,
    event: String,
    data: String,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `chunk` and returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.partial_line.extend_from_slice(&rest[..end]);
            let line = std::mem::take(&mut self.partial_line);
            self.process_line(&line, &mut events);
            let terminator_len = match (rest[end], rest.get(end + 1)) {
                (b'\r', Some(b'\n')) => 2,
                (b'\r', None) => {
                    self.after_cr = true;
                    1
                }
                _ => 1,
            };
            rest = &rest[end + terminator_len..];
        }
        self.partial_line.extend_from_slice(rest);
        events
    }

    /// Ends the stream. An event whose lines all arrived but whose closing blank line did
    /// not is still dispatched (some servers close right after the last `data:` line); a
    /// line cut in the middle is dropped.
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.partial_line.clear();
        self.take_event()
    }

    fn process_line(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        let mut line = String::from_utf8_lossy(line).into_owned();
        if !self.started {
            self.started = true;
            if let Some(stripped) = line.strip_prefix('\u{feff}') {
                line = stripped.to_owned();
            }
        }
        if line.is_empty() {
            if let Some(event) = self.take_event() {
                events.push(event);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` matter only to reconnecting clients; we never reconnect.
            _ => {}
        }
    }

    fn take_event(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent { event: name.to_owned(), data: data.to_owned() }
    }

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events: Vec<SseEvent> = chunks.iter().flat_map(|c| parser.feed(c)).collect();
        events.extend(parser.finish());
        events
    }

    #[test]
    fn parses_named_events_and_data() {
        let events = parse_all(&[b"event: message_start\ndata: {\"a\":1}\n\ndata: x\n\n"]);
        assert_eq!(events, vec![event("message_start", "{\"a\":1}"), event("", "x")]);
    }

    #[test]
    fn joins_multi_line_data_with_newlines() {
        let events = parse_all(&[b"data: one\ndata: two\ndata:three\n\n"]);
        assert_eq!(events, vec![event("", "one\ntwo\nthree")]);
    }

    #[test]
    fn skips_comments_and_unknown_fields() {
        let events = parse_all(&[
            b": keep-alive\n\nid: 7\nretry: 100\ndata: x\n\n: OPENROUTER PROCESSING\n\n",
        ]);
        assert_eq!(events, vec![event("", "x")]);
    }

    #[test]
    fn handles_crlf_and_bare_cr_line_ends() {
        let events = parse_all(&[b"event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r"]);
        assert_eq!(events, vec![event("a", "1"), event("b", "2")]);
    }

    #[test]
    fn keeps_events_split_across_chunks_including_crlf() {
        let whole = b"event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\ndata: [DONE]\r\n\r\n";
        for split in 0..whole.len() {
            let events = parse_all(&[&whole[..split], &whole[split..]]);
            assert_eq!(
                events,
                vec![event("ping", "{\"type\": \"ping\"}"), event("", "[DONE]")],
                "split at {split}"
            );
        }
        let bytewise: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(parse_all(&bytewise).len(), 2);
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        let events = parse_all(&[b"event: lonely\n\n"]);
        assert_eq!(events, vec![]);
    }

    #[test]
    fn field_without_colon_and_value_without_space() {
        let events = parse_all(&[b"data\ndata:x\n\n"]);
        assert_eq!(events, vec![event("", "\nx")]);
    }

    #[test]
    fn finish_dispatches_complete_lines_but_drops_a_cut_line() {
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: [DONE]\n").is_empty());
        assert_eq!(parser.finish(), Some(event("", "[DONE]")));

        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: {\"cho").is_empty());
        assert_eq!(parser.finish(), None);
    }

    #[test]
    fn strips_a_leading_byte_order_mark() {
        let events = parse_all(&["\u{feff}data: x\n\n".as_bytes()]);
        assert_eq!(events, vec![event("", "x")]);
    }

    #[test]
    fn multibyte_text_split_inside_a_character() {
        let whole = "data: héllo ✓\n\n".as_bytes();
        let events = parse_all(&[&whole[..8], &whole[8..]]);
        assert_eq!(events, vec![event("", "héllo ✓")]);
    }
}
