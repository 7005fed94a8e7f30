//! `read_file`: a text file as numbered lines, a page at a time. The file is streamed,
//! never loaded whole, so a multi-GB file costs only the page that is shown. An image
//! (PNG, JPEG, GIF, WebP, told by its first bytes) comes back as an image of the result
//! with a `[image: TYPE]` placeholder in its text; the session sends it to models that
//! take images and tells the others it could not be shown.

use crate::arguments::{self, optional_u64};
use crate::workspace::{self, Access};
use crate::{Tool, ToolContext, ToolDefinition, ToolFuture, ToolImage, ToolOutput, paths};
use serde::Deserialize;
use serde_json::json;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// Lines shown when the call gives no `limit`.
pub const DEFAULT_LIMIT: u64 = 2000;
/// Characters of one line shown before it is cut.
pub const MAX_LINE_CHARS: usize = 2000;
/// Bytes of numbered text returned by one call; past it the page ends early.
const MAX_OUTPUT_BYTES: usize = 256 * 1024;
/// Bytes looked at for a NUL to call a file binary.
const BINARY_PROBE: usize = 8 * 1024;
/// Up to this size the total line count is cheap enough to report.
const COUNT_LINES_UP_TO: u64 = 16 * 1024 * 1024;
use crate::image::{MAX_IMAGE_BYTES, image_size, sniff};

/// The `read_file` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFileTool;

#[derive(Deserialize)]
struct Arguments {
    path: String,
    #[serde(default, deserialize_with = "optional_u64")]
    offset: Option<u64>,
    #[serde(default, deserialize_with = "optional_u64")]
    limit: Option<u64>,
}

impl Tool for ReadFileTool {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: "read_file".to_string(),
            description: format!(
                "Reads a text file and returns its lines numbered like `cat -n` (line number, \
                 tab, text). Reads up to {DEFAULT_LIMIT} lines from the start by default; for \
                 long files pass `offset` (1-based line to start at) and `limit` (number of \
                 lines) to page. Lines longer than {MAX_LINE_CHARS} characters are cut. \
                 Images (PNG, JPEG, GIF, WebP) are shown as images when the model takes them; \
                 other binary files are refused; use list_dir for directories. The line \
                 numbers are not part of the file: leave them out of edit_file's old_string."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read, relative to the working directory or absolute."},
                    "offset": {"type": "integer", "minimum": 1, "description": "1-based line number to start reading at (default 1)."},
                    "limit": {"type": "integer", "minimum": 1, "description": format!("Maximum number of lines to return (default {DEFAULT_LIMIT}).")}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    fn is_read_only(&self) -> bool {
        true
    }

    fn run<'a>(&'a self, arguments: serde_json::Value, context: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let arguments: Arguments = match arguments::parse("read_file", arguments) {
                Ok(arguments) => arguments,
                Err(output) => return output,
            };
            let path = match workspace::confine(context, &arguments.path, Access::Read) {
                Ok(path) => path,
                Err(reason) => return ToolOutput::error(reason),
            };
            let shown = paths::display(context, &path);
            let offset = arguments.offset.unwrap_or(1);
            let limit = arguments.limit.unwrap_or(DEFAULT_LIMIT);
            if offset == 0 {
                return ToolOutput::error("offset is 1-based: the first line is offset 1");
            }
            if limit == 0 {
                return ToolOutput::error("limit must be at least 1");
            }
            let page = Page { offset, limit };
            match tokio::task::spawn_blocking(move || read_page(&path, &shown, page)).await {
                Ok(output) => output,
                Err(error) => ToolOutput::error(format!("read_file failed: {error}")),
            }
        })
    }
}

#[derive(Clone, Copy)]
struct Page {
    offset: u64,
    limit: u64,
}

fn read_page(path: &Path, shown: &str, page: Page) -> ToolOutput {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return ToolOutput::error(format!(
                "{shown} does not exist; check the path with list_dir or glob"
            ));
        }
        Err(error) => return ToolOutput::error(format!("cannot read {shown}: {error}")),
    };
    if metadata.is_dir() {
        return ToolOutput::error(format!(
            "{shown} is a directory, not a file; use list_dir to see what it contains"
        ));
    }
    if !metadata.is_file() {
        // Opening a FIFO would block forever; devices and sockets are not text files.
        return ToolOutput::error(format!(
            "{shown} is not a regular file (a device, socket or pipe); read_file only reads files"
        ));
    }
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) => return ToolOutput::error(format!("cannot open {shown}: {error}")),
    };
    match image_type(&mut file) {
        Ok(Some(media_type)) => return read_image(file, shown, media_type, metadata.len()),
        Ok(None) => {}
        Err(error) => return ToolOutput::error(format!("cannot read {shown}: {error}")),
    }
    match probe_binary(&mut file) {
        Ok(true) => {
            return ToolOutput::error(format!(
                "{shown} is a binary file ({} bytes); read_file only shows text",
                metadata.len()
            ));
        }
        Ok(false) => {}
        Err(error) => return ToolOutput::error(format!("cannot read {shown}: {error}")),
    }
    let size = metadata.len();
    if size == 0 {
        return ToolOutput::ok(format!("({shown} is empty)"));
    }
    match number_lines(BufReader::with_capacity(64 * 1024, file), page) {
        Ok(numbered) => finish(path, shown, size, page, numbered),
        Err(error) => ToolOutput::error(format!("cannot read {shown}: {error}")),
    }
}

/// The image type the file's first bytes announce, for the formats every provider takes.
/// Rewinds the file.
fn image_type(file: &mut File) -> io::Result<Option<&'static str>> {
    use std::io::Seek;
    let mut head = [0u8; 12];
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..])? {
            0 => break,
            read => filled += read,
        }
    }
    file.rewind()?;
    let media_type = sniff(&head[..filled]);
    Ok(media_type)
}

/// The whole image as the result's image, with its placeholder and size as the text.
fn read_image(mut file: File, shown: &str, media_type: &str, size: u64) -> ToolOutput {
    if size > MAX_IMAGE_BYTES {
        return ToolOutput::error(format!(
            "{shown} is an image ({media_type}, {size} bytes), too large to show: at most \
             {MAX_IMAGE_BYTES} bytes"
        ));
    }
    let mut bytes = Vec::new();
    if let Err(error) = file.read_to_end(&mut bytes) {
        return ToolOutput::error(format!("cannot read {shown}: {error}"));
    }
    if let Err(why) = image_size(&bytes) {
        return ToolOutput::error(format!(
            "{shown} is an image ({media_type}) that cannot be shown: {why}"
        ));
    }
    let image = ToolImage {
        media_type: media_type.to_string(),
        data: kestrel_protocol::base64::encode(&bytes),
    };
    ToolOutput {
        content: format!("[image: {media_type}] {shown} ({} bytes)", bytes.len()),
        images: vec![image],
        ..ToolOutput::default()
    }
}

/// True when the first bytes of the file hold a NUL. Rewinds the file.
fn probe_binary(file: &mut File) -> io::Result<bool> {
    use std::io::Seek;
    let mut buffer = vec![0; BINARY_PROBE];
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..])? {
            0 => break,
            read => filled += read,
        }
    }
    file.rewind()?;
    Ok(buffer[..filled].contains(&0))
}

/// What one pass over the file produced.
struct Numbered {
    text: String,
    /// Line number of the last line shown (0 when none was).
    last_shown: u64,
    /// Lines seen in all; only the total when `at_end`.
    lines_seen: u64,
    /// The file ended within this page.
    at_end: bool,
    /// The page stopped early at the output byte cap.
    byte_capped: bool,
    cut_lines: u64,
}

fn number_lines(mut reader: impl BufRead, page: Page) -> io::Result<Numbered> {
    let mut numbered = Numbered {
        text: String::new(),
        last_shown: 0,
        lines_seen: 0,
        at_end: false,
        byte_capped: false,
        cut_lines: 0,
    };
    let last_wanted = page.offset.saturating_add(page.limit - 1);
    let mut line = Vec::new();
    loop {
        let number = numbered.lines_seen + 1;
        let keep = number >= page.offset;
        let Some(cut) = read_line(&mut reader, &mut line, keep)? else {
            numbered.at_end = true;
            break;
        };
        numbered.lines_seen = number;
        if !keep {
            continue;
        }
        let mut text = String::from_utf8_lossy(&line).into_owned();
        if text.ends_with('\r') {
            text.pop();
        }
        let mut was_cut = cut;
        if let Some((end, _)) = text.char_indices().nth(MAX_LINE_CHARS) {
            text.truncate(end);
            was_cut = true;
        }
        if was_cut {
            text.push_str(" [... line cut ...]");
            numbered.cut_lines += 1;
        }
        if numbered.text.len() + text.len() > MAX_OUTPUT_BYTES && numbered.last_shown > 0 {
            numbered.byte_capped = true;
            break;
        }
        numbered.text.push_str(&format!("{number:>6}\t{text}\n"));
        numbered.last_shown = number;
        if number >= last_wanted {
            // Peek whether anything follows, so the note can say "end of file".
            numbered.at_end = reader.fill_buf()?.is_empty();
            break;
        }
    }
    Ok(numbered)
}

/// Reads one line into `line` (without its `\n`), keeping at most a few KiB of it and
/// skipping the rest; `keep = false` skips the whole line. `None` at end of file,
/// otherwise whether the line was cut.
fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    keep: bool,
) -> io::Result<Option<bool>> {
    const KEEP_BYTES: usize = MAX_LINE_CHARS * 4;
    line.clear();
    let mut any = false;
    let mut cut = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(any.then_some(cut));
        }
        any = true;
        let (chunk, found_newline) = match memchr_newline(buffer) {
            Some(position) => (&buffer[..position], true),
            None => (buffer, false),
        };
        if keep {
            let room = KEEP_BYTES.saturating_sub(line.len());
            if chunk.len() > room {
                cut = true;
            }
            line.extend_from_slice(&chunk[..chunk.len().min(room)]);
        }
        let used = chunk.len() + usize::from(found_newline);
        reader.consume(used);
        if found_newline {
            return Ok(Some(cut));
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

fn finish(path: &Path, shown: &str, size: u64, page: Page, numbered: Numbered) -> ToolOutput {
    if numbered.last_shown == 0 {
        return ToolOutput::error(format!(
            "offset {} is past the end of {shown}, which has {} lines; use an offset from 1 to {}",
            page.offset, numbered.lines_seen, numbered.lines_seen
        ));
    }
    let mut text = numbered.text;
    if numbered.cut_lines > 0 {
        text.push_str(&format!(
            "\n[{} line(s) longer than {MAX_LINE_CHARS} characters were cut]",
            numbered.cut_lines
        ));
    }
    if !numbered.at_end {
        let next = numbered.last_shown + 1;
        let total = if size <= COUNT_LINES_UP_TO {
            count_lines(path).map(|lines| format!("{lines} lines")).unwrap_or_default()
        } else {
            String::new()
        };
        let total = if total.is_empty() {
            format!("{size} bytes")
        } else {
            format!("{total}, {size} bytes")
        };
        let why = if numbered.byte_capped { " (output size limit reached)" } else { "" };
        text.push_str(&format!(
            "\n[showing lines {}-{} of {shown} ({total}){why}; to read on, call read_file with \
             offset={next}]",
            page.offset, numbered.last_shown
        ));
    } else if page.offset > 1 {
        text.push_str(&format!("\n[end of file: {} lines]", numbered.last_shown));
    }
    ToolOutput::ok(text)
}

/// Lines in the file, counting a last line without `\n`.
fn count_lines(path: &Path) -> Option<u64> {
    let mut file = File::open(path).ok()?;
    let mut buffer = vec![0; 64 * 1024];
    let mut lines = 0u64;
    let mut last = b'\n';
    loop {
        let read = file.read(&mut buffer).ok()?;
        if read == 0 {
            break;
        }
        lines += buffer[..read].iter().filter(|&&b| b == b'\n').count() as u64;
        last = buffer[read - 1];
    }
    Some(lines + u64::from(last != b'\n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest valid PNG: 1×1, transparent.
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F,
        0x15, 0xC4, 0x89, 0x00, 0x00, 0x00, 0x0A, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82,
    ];

    fn read(name: &str, bytes: &[u8]) -> ToolOutput {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        read_page(&path, name, Page { offset: 1, limit: DEFAULT_LIMIT })
    }

    #[test]
    fn an_image_is_returned_as_an_image_with_a_placeholder() {
        let output = read("dot.bin", PNG);
        assert!(!output.is_error, "{}", output.content);
        assert_eq!(output.content, format!("[image: image/png] dot.bin ({} bytes)", PNG.len()));
        assert_eq!(output.images.len(), 1);
        assert_eq!(output.images[0].media_type, "image/png");
        assert!(output.images[0].data.starts_with("iVBORw0KGgo"), "{}", output.images[0].data);
        // A JFIF segment, then a baseline frame header of 1×1 (height, then width).
        let jpeg = read(
            "photo.jpg",
            &[
                0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8, 0, 1, 0, 1, 1, 1, 0x11,
                0, 0xFF, 0xD9,
            ],
        );
        assert_eq!(jpeg.images[0].media_type, "image/jpeg");
        let webp = read("a.webp", b"RIFF\x11\0\0\0WEBPVP8L\x05\0\0\0\x2f\0\0\0\0");
        assert_eq!(webp.images[0].media_type, "image/webp");
    }

    #[test]
    fn other_binaries_and_huge_images_are_refused_clearly() {
        let output = read("blob.bin", b"\0\x01\x02 not an image");
        assert!(output.is_error && output.content.contains("binary file"), "{}", output.content);
        assert!(output.images.is_empty());
        let mut huge = PNG.to_vec();
        huge.resize(usize::try_from(MAX_IMAGE_BYTES).unwrap() + 1, 0);
        let output = read("huge.png", &huge);
        assert!(
            output.is_error && output.content.contains("too large to show"),
            "{}",
            output.content
        );
        assert!(output.images.is_empty());
        // Text that merely starts like a format name is text.
        let output = read("notes.txt", b"GIF is a format\n");
        assert!(!output.is_error && output.images.is_empty(), "{}", output.content);
    }
}
