//! Bounded capture of a command's output: the first and last few KiB are kept and the
//! middle is counted, so memory stays flat however much a command prints.

use std::collections::VecDeque;

/// Bytes kept from the start and from the end of the output, each.
pub(crate) const DEFAULT_KEEP: usize = 16 * 1024;

/// The head and tail of a byte stream, with a count of what fell out between them.
#[derive(Debug)]
pub(crate) struct HeadTail {
    keep: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped_bytes: u64,
    dropped_lines: u64,
}

impl HeadTail {
    pub(crate) fn new(keep: usize) -> Self {
        Self { keep, head: Vec::new(), tail: VecDeque::new(), dropped_bytes: 0, dropped_lines: 0 }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        if self.head.len() < self.keep {
            let room = (self.keep - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..room]);
            bytes = &bytes[room..];
        }
        if bytes.len() >= self.keep {
            // Everything in the tail and the front of this chunk is dropped at once.
            let (gone, kept) = bytes.split_at(bytes.len() - self.keep);
            self.drop_counted(self.tail.len());
            self.count_dropped(gone);
            self.tail.extend(kept);
            return;
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.keep);
        self.drop_counted(excess);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    /// The kept text; when something was dropped, the cut is moved to whole lines and
    /// a marker says how many bytes and lines are missing.
    pub(crate) fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if self.dropped_bytes == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let mut dropped_bytes = self.dropped_bytes;
        let mut dropped_lines = self.dropped_lines;
        // Cut the head after its last newline and the tail after its first, when they
        // have one, so the marker sits between whole lines.
        let head_end = match self.head.iter().rposition(|&b| b == b'\n') {
            Some(position) => position + 1,
            None => self.head.len(),
        };
        let tail_start = match tail.iter().position(|&b| b == b'\n') {
            Some(position) if position + 1 < tail.len() => position + 1,
            Some(_) | None => 0,
        };
        let cut_bytes = (self.head.len() - head_end + tail_start) as u64;
        if cut_bytes > 0 {
            dropped_bytes += cut_bytes;
            dropped_lines += u64::from(tail_start > 0);
        }
        let mut text = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[... {dropped_bytes} bytes ({dropped_lines} lines) omitted from the middle of the output ...]\n"
        ));
        text.push_str(&String::from_utf8_lossy(&tail[tail_start..]));
        text
    }

    fn drop_counted(&mut self, count: usize) {
        let gone: Vec<u8> = self.tail.drain(..count).collect();
        self.count_dropped(&gone);
    }

    fn count_dropped(&mut self, bytes: &[u8]) {
        self.dropped_bytes += bytes.len() as u64;
        self.dropped_lines += bytes.iter().filter(|&&b| b == b'\n').count() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut buffer = HeadTail::new(8);
        buffer.push(b"abc\n");
        buffer.push(b"def\n");
        assert_eq!(buffer.render(), "abc\ndef\n");
    }

    #[test]
    fn long_output_keeps_head_and_tail_on_line_boundaries() {
        let mut buffer = HeadTail::new(10);
        for line in 0..1000 {
            buffer.push(format!("line {line}\n").as_bytes());
        }
        let text = buffer.render();
        assert!(text.starts_with("line 0\n"), "{text}");
        assert!(text.ends_with("line 999\n"), "{text}");
        assert!(text.contains("omitted"), "{text}");
        assert!(text.len() < 200, "{text}");
    }

    #[test]
    fn one_huge_chunk_is_bounded() {
        let mut buffer = HeadTail::new(16);
        buffer.push(&vec![b'x'; 1_000_000]);
        assert!(buffer.render().len() < 200);
        assert_eq!(buffer.dropped_bytes, 1_000_000 - 32);
    }
}
