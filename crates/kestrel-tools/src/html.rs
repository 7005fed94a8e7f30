//! HTML → markdown-ish text for `web_fetch`: headings, paragraphs, links, lists, code,
//! quotes and tables survive; script, style, nav and other chrome are dropped. A small
//! tolerant scanner rather than a full HTML5 parser: pages only need to be readable.

use reqwest::Url;

/// Elements dropped with everything inside them.
const DROPPED: &[&str] =
    &["nav", "noscript", "svg", "template", "iframe", "button", "select", "canvas", "object"];
/// Elements whose content is raw text up to their end tag, dropped.
const RAW_DROPPED: &[&str] = &["script", "style"];
/// Elements that never have an end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr",
];
/// Elements that start and end a paragraph-like block.
const BLOCKS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "figure",
    "figcaption",
    "form",
    "fieldset",
    "details",
    "summary",
    "address",
    "table",
    "dl",
    "body",
];

/// Converts an HTML document to readable text; `base` resolves relative links.
pub fn to_markdown(html: &str, base: Option<&Url>) -> String {
    let mut writer = Writer::new(base);
    let mut scanner = Scanner { text: html, position: 0 };
    while let Some(token) = scanner.next_token() {
        writer.token(token, &mut scanner);
    }
    writer.finish()
}

enum Token<'a> {
    Text(&'a str),
    Start { name: String, attributes: Vec<(String, String)>, self_closing: bool },
    End { name: String },
}

struct Scanner<'a> {
    text: &'a str,
    position: usize,
}

impl<'a> Scanner<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.position..]
    }

    fn next_token(&mut self) -> Option<Token<'a>> {
        loop {
            let rest = self.rest();
            if rest.is_empty() {
                return None;
            }
            if !rest.starts_with('<') {
                let end = rest[1..].find('<').map_or(rest.len(), |index| index + 1);
                self.position += end;
                return Some(Token::Text(&rest[..end]));
            }
            if let Some(after) = rest.strip_prefix("<!--") {
                let end = after.find("-->").map_or(rest.len(), |index| index + 4 + 3);
                self.position += end;
                continue;
            }
            if rest.starts_with("<!") || rest.starts_with("<?") {
                let end = rest.find('>').map_or(rest.len(), |index| index + 1);
                self.position += end;
                continue;
            }
            let (closing, body) = match rest.strip_prefix("</") {
                Some(body) => (true, body),
                None => (false, &rest[1..]),
            };
            let name_length = body
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == ':'))
                .unwrap_or(body.len());
            if name_length == 0 || !body.starts_with(|c: char| c.is_ascii_alphabetic()) {
                // A lone `<` in text, as browsers treat it.
                self.position += 1;
                return Some(Token::Text("<"));
            }
            let name = body[..name_length].to_ascii_lowercase();
            let tag_end = find_tag_end(body).map_or(body.len(), |index| index + 1);
            let inner = &body[name_length..tag_end.saturating_sub(1).max(name_length)];
            self.position += rest.len() - body.len() + tag_end;
            if closing {
                return Some(Token::End { name });
            }
            let self_closing = inner.trim_end().ends_with('/');
            return Some(Token::Start { name, attributes: parse_attributes(inner), self_closing });
        }
    }

    /// Skips raw text up to and including `</name>`, case-insensitively.
    fn skip_raw(&mut self, name: &str) {
        let closing = format!("</{name}");
        let rest = self.rest();
        let lower = rest.to_ascii_lowercase();
        match lower.find(&closing) {
            Some(index) => {
                let after = &rest[index..];
                let end = after.find('>').map_or(after.len(), |close| close + 1);
                self.position += index + end;
            }
            None => self.position = self.text.len(),
        }
    }
}

/// Index of the `>` that ends a tag, skipping quoted attribute values.
fn find_tag_end(body: &str) -> Option<usize> {
    let mut quote = None;
    for (index, character) in body.char_indices() {
        match (quote, character) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(character),
            (None, '>') => return Some(index),
            (None, _) => {}
        }
    }
    None
}

fn parse_attributes(inner: &str) -> Vec<(String, String)> {
    let mut attributes = Vec::new();
    let mut rest = inner.trim_start();
    while !rest.is_empty() {
        let name_end =
            rest.find(|c: char| c.is_whitespace() || c == '=' || c == '/').unwrap_or(rest.len());
        let name = rest[..name_end].to_ascii_lowercase();
        rest = rest[name_end..].trim_start();
        let mut value = String::new();
        if let Some(after) = rest.strip_prefix('=') {
            let after = after.trim_start();
            let (raw, remaining) = match after.chars().next() {
                Some(quote @ ('"' | '\'')) => {
                    let body = &after[1..];
                    let end = body.find(quote).unwrap_or(body.len());
                    (&body[..end], body.get(end + 1..).unwrap_or(""))
                }
                _ => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            value = decode_entities(raw);
            rest = remaining;
        } else if name_end == 0 {
            rest = &rest[rest.chars().next().map_or(0, char::len_utf8)..];
        }
        if !name.is_empty() {
            attributes.push((name, value));
        }
        rest = rest.trim_start();
    }
    attributes
}

/// Decodes character references; unknown ones are kept as written.
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(index) = rest.find('&') {
        out.push_str(&rest[..index]);
        rest = &rest[index..];
        let end = rest[1..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '#')).map(|i| i + 1);
        let (name, consumed) = match end {
            Some(end) if rest[end..].starts_with(';') => (&rest[1..end], end + 1),
            Some(end) => (&rest[1..end], end),
            None => (&rest[1..], rest.len()),
        };
        match entity(name) {
            Some(character) => {
                out.push(character);
                rest = &rest[consumed..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "laquo" => '«',
        "raquo" => '»',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "bull" => '•',
        "middot" => '·',
        "times" => '×',
        "rarr" => '→',
        "larr" => '←',
        _ => return None,
    })
}

struct List {
    ordered: bool,
    next: u64,
}

struct Writer<'a> {
    base: Option<&'a Url>,
    out: String,
    title: Option<String>,
    in_title: bool,
    /// Whitespace seen but not yet written (collapsed to one space).
    pending_space: bool,
    /// Name and nesting of a dropped element being skipped.
    dropping: Option<(String, usize)>,
    lists: Vec<List>,
    quotes: usize,
    preformatted: usize,
    /// Open links: target and where their text starts in `out`.
    links: Vec<(Option<String>, usize)>,
    cell_in_row: usize,
}

impl<'a> Writer<'a> {
    fn new(base: Option<&'a Url>) -> Self {
        Self {
            base,
            out: String::new(),
            title: None,
            in_title: false,
            pending_space: false,
            dropping: None,
            lists: Vec::new(),
            quotes: 0,
            preformatted: 0,
            links: Vec::new(),
            cell_in_row: 0,
        }
    }

    fn token(&mut self, token: Token<'_>, scanner: &mut Scanner<'_>) {
        if let Some((dropped, depth)) = &mut self.dropping {
            match &token {
                Token::Start { name, self_closing: false, .. } if name == dropped => *depth += 1,
                Token::End { name } if name == dropped => {
                    *depth -= 1;
                    if *depth == 0 {
                        self.dropping = None;
                    }
                }
                Token::Text(_) | Token::Start { .. } | Token::End { .. } => {}
            }
            return;
        }
        match token {
            Token::Text(text) => self.text(text),
            Token::Start { name, attributes, self_closing } => {
                if RAW_DROPPED.contains(&name.as_str()) {
                    if !self_closing {
                        scanner.skip_raw(&name);
                    }
                } else if DROPPED.contains(&name.as_str()) {
                    if !self_closing {
                        self.dropping = Some((name, 1));
                    }
                } else {
                    self.start(&name, &attributes);
                    if self_closing && !VOID.contains(&name.as_str()) {
                        self.end(&name);
                    }
                }
            }
            Token::End { name } => self.end(&name),
        }
    }

    fn text(&mut self, raw: &str) {
        let text = decode_entities(raw);
        if self.in_title {
            self.title.get_or_insert_with(String::new).push_str(&text);
            return;
        }
        if self.preformatted > 0 {
            for (index, line) in text.split('\n').enumerate() {
                if index > 0 {
                    self.out.push('\n');
                }
                if !line.is_empty() {
                    self.line_prefix();
                    self.out.push_str(line);
                }
            }
            return;
        }
        for (index, word) in text.split(char::is_whitespace).enumerate() {
            if index > 0 {
                self.pending_space = true;
            }
            if word.is_empty() {
                continue;
            }
            if self.pending_space && !self.at_line_start() && !self.out.ends_with(' ') {
                self.out.push(' ');
            }
            self.pending_space = false;
            self.line_prefix();
            self.out.push_str(word);
        }
    }

    fn start(&mut self, name: &str, attributes: &[(String, String)]) {
        let attribute = |wanted: &str| {
            attributes.iter().find(|(key, _)| key == wanted).map(|(_, value)| value.as_str())
        };
        match name {
            "title" => self.in_title = true,
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.blank_line();
                let level = name[1..].parse::<usize>().unwrap_or(1);
                self.line_prefix();
                self.out.push_str(&"#".repeat(level));
                self.out.push(' ');
            }
            "br" => {
                self.out.push('\n');
                self.pending_space = false;
            }
            "hr" => {
                self.blank_line();
                self.out.push_str("---");
                self.blank_line();
            }
            "ul" | "ol" | "menu" => {
                if self.lists.is_empty() {
                    self.blank_line();
                } else {
                    self.new_line();
                }
                let start = attribute("start").and_then(|value| value.parse().ok()).unwrap_or(1);
                self.lists.push(List { ordered: name == "ol", next: start });
            }
            "li" => {
                self.new_line();
                let depth = self.lists.len().max(1) - 1;
                let marker = match self.lists.last_mut() {
                    Some(list) if list.ordered => {
                        list.next += 1;
                        format!("{}. ", list.next - 1)
                    }
                    Some(_) | None => "- ".to_string(),
                };
                self.out.push_str(&"> ".repeat(self.quotes));
                self.out.push_str(&"  ".repeat(depth));
                self.out.push_str(&marker);
            }
            "pre" => {
                self.blank_line();
                self.line_prefix();
                self.out.push_str("```\n");
                self.preformatted += 1;
            }
            "code" | "kbd" | "samp" if self.preformatted == 0 => self.inline("`"),
            "strong" | "b" => self.inline("**"),
            "em" | "i" => self.inline("_"),
            "blockquote" => {
                self.blank_line();
                self.quotes += 1;
            }
            "a" => {
                let target = attribute("href").and_then(|href| self.link_target(href));
                self.separate();
                self.links.push((target, self.out.len()));
            }
            "img" => {
                let alt = attribute("alt").map(str::trim).unwrap_or("");
                if !alt.is_empty() {
                    self.separate();
                    self.line_prefix();
                    match attribute("src").and_then(|src| self.link_target(src)) {
                        Some(src) => self.out.push_str(&format!("![{alt}]({src})")),
                        None => self.out.push_str(&format!("[image: {alt}]")),
                    }
                }
            }
            "tr" => {
                self.new_line();
                self.cell_in_row = 0;
            }
            "td" | "th" => {
                if self.cell_in_row > 0 {
                    self.out.push_str(" | ");
                }
                self.cell_in_row += 1;
                self.pending_space = false;
            }
            "dt" | "dd" => self.new_line(),
            _ if BLOCKS.contains(&name) => self.blank_line(),
            _ => {}
        }
    }

    fn end(&mut self, name: &str) {
        match name {
            "title" => self.in_title = false,
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => self.blank_line(),
            "ul" | "ol" | "menu" => {
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank_line();
                } else {
                    self.new_line();
                }
            }
            "li" | "tr" | "dt" | "dd" => self.new_line(),
            "pre" => {
                self.preformatted = self.preformatted.saturating_sub(1);
                self.new_line();
                self.line_prefix();
                self.out.push_str("```");
                self.blank_line();
            }
            "code" | "kbd" | "samp" if self.preformatted == 0 => self.inline("`"),
            "strong" | "b" => self.inline("**"),
            "em" | "i" => self.inline("_"),
            "blockquote" => {
                self.quotes = self.quotes.saturating_sub(1);
                self.blank_line();
            }
            "a" => self.close_link(),
            _ if BLOCKS.contains(&name) => self.blank_line(),
            _ => {}
        }
    }

    /// Writes an inline marker, keeping a pending space before it.
    fn inline(&mut self, marker: &str) {
        if self.pending_space && !self.at_line_start() && !self.out.ends_with(' ') {
            self.out.push(' ');
            self.pending_space = false;
        }
        self.line_prefix();
        self.out.push_str(marker);
    }

    fn separate(&mut self) {
        if self.pending_space && !self.at_line_start() && !self.out.ends_with(' ') {
            self.out.push(' ');
        }
        self.pending_space = false;
    }

    fn close_link(&mut self) {
        let Some((target, start)) = self.links.pop() else { return };
        let Some(target) = target else { return };
        let start = start.min(self.out.len());
        let label = self.out[start..].trim().to_string();
        if label.is_empty() || label.contains('\n') {
            return;
        }
        self.out.truncate(start);
        if label == target {
            self.out.push_str(&format!("<{target}>"));
        } else {
            self.out.push_str(&format!("[{label}]({target})"));
        }
    }

    /// An absolute URL for `href`, or `None` for fragments and scripts.
    fn link_target(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') || href.starts_with("javascript:") {
            return None;
        }
        match self.base {
            Some(base) => base.join(href).ok().map(String::from),
            None => Some(href.to_string()),
        }
    }

    fn at_line_start(&self) -> bool {
        self.out.is_empty() || self.out.ends_with('\n')
    }

    /// Starts a quoted line with its `> ` markers.
    fn line_prefix(&mut self) {
        if self.quotes > 0 && self.at_line_start() {
            self.out.push_str(&"> ".repeat(self.quotes));
        }
    }

    fn trim_trailing_spaces(&mut self) {
        let kept = self.out.trim_end_matches([' ', '\t']).len();
        self.out.truncate(kept);
    }

    fn new_line(&mut self) {
        self.trim_trailing_spaces();
        if !self.at_line_start() {
            self.out.push('\n');
        }
        self.pending_space = false;
    }

    fn blank_line(&mut self) {
        self.new_line();
        if !self.out.is_empty() && !self.out.ends_with("\n\n") {
            self.out.push('\n');
        }
    }

    fn finish(mut self) -> String {
        self.new_line();
        let mut text = String::new();
        if let Some(title) = &self.title {
            let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
            if !title.is_empty() {
                text.push_str(&format!("Title: {title}\n\n"));
            }
        }
        let mut blank_run = 0;
        for line in self.out.lines() {
            let line = line.trim_end();
            if line.is_empty() || line.chars().all(|c| c == '>' || c == ' ') {
                blank_run += 1;
                if blank_run > 1 {
                    continue;
                }
                text.push('\n');
                continue;
            }
            blank_run = 0;
            text.push_str(line);
            text.push('\n');
        }
        text.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_the_common_elements() {
        let html = r#"<html><head><title>T  page</title><style>p{}</style></head><body>
            <nav><a href="/x">Menu</a></nav>
            <h1>Hello &amp; welcome</h1><p>Some <b>bold</b> and <a href="/doc">a link</a>.</p>
            <ul><li>one</li><li>two<ol><li>inner</li></ol></li></ul>
            <pre><code>fn main() {
    x();
}</code></pre>
            <script>alert("<p>no</p>")</script><p>end<br>next</p></body></html>"#;
        let base = Url::parse("https://example.com/a/b").unwrap();
        let text = to_markdown(html, Some(&base));
        assert!(text.starts_with("Title: T page"), "{text}");
        assert!(text.contains("# Hello & welcome"), "{text}");
        assert!(text.contains("Some **bold** and [a link](https://example.com/doc)."), "{text}");
        assert!(text.contains("- one\n- two\n  1. inner"), "{text}");
        assert!(text.contains("```\nfn main() {\n    x();\n}\n```"), "{text}");
        assert!(text.contains("end\nnext"), "{text}");
        assert!(!text.contains("Menu") && !text.contains("alert"), "{text}");
    }

    #[test]
    fn entities_and_stray_angle_brackets_survive() {
        assert_eq!(decode_entities("a &lt; b &#x41;&#66; &bogus; &"), "a < b AB &bogus; &");
        assert_eq!(to_markdown("<p>1 < 2 and 3 > 2</p>", None), "1 < 2 and 3 > 2");
    }

    #[test]
    fn blockquotes_and_tables() {
        let text = to_markdown(
            "<blockquote><p>quoted</p></blockquote><table><tr><th>a</th><th>b</th></tr>\
             <tr><td>1</td><td>2</td></tr></table>",
            None,
        );
        assert!(text.contains("> quoted"), "{text}");
        assert!(text.contains("a | b\n1 | 2"), "{text}");
    }
}
