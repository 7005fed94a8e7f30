//! A minimal HTTP/1.1 server side: read one request (Content-Length or chunked body),
//! write a fixed-length or chunked response. Every response closes the connection, so
//! a cut stream is only ever a missing terminating chunk, which clients report as an error.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Longest request head (request line plus headers) accepted.
const MAX_HEAD_BYTES: u64 = 64 * 1024;
/// Largest request body accepted; conversations can be big, but not this big.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A parsed request.
#[derive(Debug)]
pub(crate) struct HttpRequest {
    pub method: String,
    pub target: String,
    /// Lower-cased names, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(header, _)| header == name).map(|(_, value)| value.as_str())
    }

    /// The target without its query string.
    pub fn path(&self) -> &str {
        match self.target.split_once('?') {
            Some((path, _)) => path,
            None => &self.target,
        }
    }
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("request too large: {0}")]
    TooLarge(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one request. `Ok(None)` when the client closed before sending anything.
/// Answers `Expect: 100-continue` through `writer` before reading the body.
pub(crate) async fn read_request<R, W>(
    reader: &mut R,
    writer: &mut W,
) -> Result<Option<HttpRequest>, ReadError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut head_budget = MAX_HEAD_BYTES;
    let Some(request_line) = read_line(reader, &mut head_budget).await? else {
        return Ok(None);
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Malformed(format!("bad request line {request_line:?}")));
    };
    if method.is_empty() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return Err(ReadError::Malformed(format!("bad request line {request_line:?}")));
    }
    let mut headers = Vec::new();
    loop {
        let Some(line) = read_line(reader, &mut head_budget).await? else {
            return Err(ReadError::Malformed("connection closed inside the headers".into()));
        };
        if line.is_empty() {
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Malformed(format!("bad header line {line:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let mut request = HttpRequest {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        body: Vec::new(),
    };
    if request.header("expect").is_some_and(|value| value.eq_ignore_ascii_case("100-continue")) {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        writer.flush().await?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
    request.body = if chunked {
        read_chunked_body(reader).await?
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| ReadError::Malformed(format!("bad content-length {length:?}")))?;
        if length > MAX_BODY_BYTES {
            return Err(ReadError::TooLarge(format!("body of {length} bytes")));
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        body
    } else {
        Vec::new()
    };
    Ok(Some(request))
}

/// One CRLF- (or LF-) terminated line without its terminator; `None` at a clean EOF.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    budget: &mut u64,
) -> Result<Option<String>, ReadError> {
    let mut line = Vec::new();
    let read = (&mut *reader).take(*budget).read_until(b'\n', &mut line).await?;
    if read == 0 {
        return if *budget == 0 {
            Err(ReadError::TooLarge("request head".into()))
        } else {
            Ok(None)
        };
    }
    *budget = budget.saturating_sub(read as u64);
    if line.last() != Some(&b'\n') {
        return Err(if *budget == 0 {
            ReadError::TooLarge("request head".into())
        } else {
            ReadError::Malformed("connection closed mid-line".into())
        });
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| ReadError::Malformed("request head is not UTF-8".into()))
}

async fn read_chunked_body<R: AsyncBufRead + Unpin>(reader: &mut R) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    let mut budget = MAX_HEAD_BYTES;
    loop {
        let Some(size_line) = read_line(reader, &mut budget).await? else {
            return Err(ReadError::Malformed("connection closed inside a chunked body".into()));
        };
        let size_text = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ReadError::Malformed(format!("bad chunk size {size_line:?}")))?;
        if size == 0 {
            break;
        }
        if body.len() + size > MAX_BODY_BYTES {
            return Err(ReadError::TooLarge("chunked body".into()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).await?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf).await?;
        if &crlf != b"\r\n" {
            return Err(ReadError::Malformed("chunk not followed by CRLF".into()));
        }
    }
    // Trailers, up to the empty line.
    loop {
        match read_line(reader, &mut budget).await? {
            Some(line) if !line.is_empty() => continue,
            Some(_) | None => break,
        }
    }
    Ok(body)
}

/// The reason phrase for the statuses the server uses; clients ignore it anyway.
fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Error",
    }
}

fn head(status: u16, headers: &[(String, String)], framing: &str) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason_phrase(status));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(framing);
    head.push_str("connection: close\r\n\r\n");
    head.into_bytes()
}

/// Writes a complete response with a Content-Length body.
pub(crate) async fn write_full<W: AsyncWrite + Unpin>(
    writer: &mut W,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut bytes = head(status, headers, &format!("content-length: {}\r\n", body.len()));
    bytes.extend_from_slice(body);
    writer.write_all(&bytes).await?;
    writer.flush().await
}

/// Writes a head announcing `content_length` bytes but only `partial` of them, so the
/// client sees the connection end early.
pub(crate) async fn write_truncated<W: AsyncWrite + Unpin>(
    writer: &mut W,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
    partial: usize,
) -> std::io::Result<()> {
    let mut bytes = head(status, headers, &format!("content-length: {}\r\n", body.len()));
    bytes.extend_from_slice(&body[..partial.min(body.len())]);
    writer.write_all(&bytes).await?;
    writer.flush().await
}

/// Writes the head of a chunked response; follow with [`write_chunk`] and [`finish_chunked`].
pub(crate) async fn start_chunked<W: AsyncWrite + Unpin>(
    writer: &mut W,
    status: u16,
    headers: &[(String, String)],
) -> std::io::Result<()> {
    writer.write_all(&head(status, headers, "transfer-encoding: chunked\r\n")).await?;
    writer.flush().await
}

/// Writes one chunk and flushes it, so the client sees it at once.
pub(crate) async fn write_chunk<W: AsyncWrite + Unpin>(
    writer: &mut W,
    data: &[u8],
) -> std::io::Result<()> {
    if data.is_empty() {
        return Ok(()); // an empty chunk would end the body
    }
    let mut bytes = format!("{:x}\r\n", data.len()).into_bytes();
    bytes.extend_from_slice(data);
    bytes.extend_from_slice(b"\r\n");
    writer.write_all(&bytes).await?;
    writer.flush().await
}

/// Writes the terminating chunk: the body ended normally.
pub(crate) async fn finish_chunked<W: AsyncWrite + Unpin>(writer: &mut W) -> std::io::Result<()> {
    writer.write_all(b"0\r\n\r\n").await?;
    writer.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(raw: &[u8]) -> Result<Option<HttpRequest>, ReadError> {
        let mut reader = tokio::io::BufReader::new(raw);
        let mut sink = Vec::new();
        read_request(&mut reader, &mut sink).await
    }

    #[tokio::test]
    async fn content_length_body_is_read() {
        let raw = b"POST /v1/x?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}";
        let Ok(Some(request)) = parse(raw).await else { panic!("not parsed") };
        assert_eq!(request.method, "POST");
        assert_eq!(request.path(), "/v1/x");
        assert_eq!(request.headers[0], ("host".to_owned(), "h".to_owned()));
        assert_eq!(request.body, b"{}");
    }

    #[tokio::test]
    async fn chunked_body_is_joined() {
        let raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let Ok(Some(request)) = parse(raw).await else { panic!("not parsed") };
        assert_eq!(request.body, b"abcde");
    }

    #[tokio::test]
    async fn bad_request_line_is_malformed() {
        let result = parse(b"GARBAGE\r\n\r\n").await;
        assert!(matches!(result, Err(ReadError::Malformed(_))), "{result:?}");
    }

    #[tokio::test]
    async fn bad_content_length_is_malformed() {
        let result = parse(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n").await;
        assert!(matches!(result, Err(ReadError::Malformed(_))), "{result:?}");
    }

    #[tokio::test]
    async fn empty_connection_is_none() {
        assert!(matches!(parse(b"").await, Ok(None)));
    }
}
