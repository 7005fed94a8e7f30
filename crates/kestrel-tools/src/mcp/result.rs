//! An MCP `tools/call` result as a [`ToolOutput`]: text blocks as text, images as image
//! parts (with a placeholder in the text where each stood), embedded resources and links
//! as text, `structuredContent` as JSON text unless a text block already carries it, and
//! `isError` as `is_error`. Text is bounded like a command's output.

use crate::output::HeadTail;
use crate::{ToolImage, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

/// Bytes of text kept from the start and from the end of a long result, each.
const KEEP_BYTES: usize = 64 * 1024;

/// Maps a result faithfully; nothing the server sent is silently dropped.
pub(crate) fn tool_output(result: CallToolResult) -> ToolOutput {
    let is_error = result.is_error.unwrap_or(false);
    let mut texts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in result.content {
        match block {
            ContentBlock::Text(text) => texts.push(text.text),
            ContentBlock::Image(image) => {
                texts.push(format!("[image: {}]", image.mime_type));
                images.push(ToolImage { media_type: image.mime_type, data: image.data });
            }
            ContentBlock::Audio(audio) => texts.push(format!(
                "[audio: {}, {} bytes of base64 not shown]",
                audio.mime_type,
                audio.data.len()
            )),
            ContentBlock::Resource(embedded) => match embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    texts.push(format!("[resource: {uri}]\n{text}"))
                }
                ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
                    match mime_type.filter(|mime| mime.starts_with("image/")) {
                        Some(mime) => {
                            texts.push(format!("[image: {mime}, resource {uri}]"));
                            images.push(ToolImage { media_type: mime, data: blob });
                        }
                        None => texts.push(format!(
                            "[resource: {uri}, {} bytes of base64 not shown]",
                            blob.len()
                        )),
                    }
                }
                // Resource contents newer than this client.
                _ => texts.push("[resource this client cannot show]".to_string()),
            },
            ContentBlock::ResourceLink(link) => {
                let mut line = format!("[resource link: {} <{}>", link.name, link.uri);
                if let Some(mime) = &link.mime_type {
                    line.push_str(&format!(", {mime}"));
                }
                if let Some(description) = &link.description {
                    line.push_str(&format!(": {description}"));
                }
                line.push(']');
                texts.push(line);
            }
            // A content type newer than this client: say so rather than drop it.
            other => texts.push(format!("[content this client cannot show: {}]", kind(&other))),
        }
    }
    if let Some(structured) = result.structured_content {
        // Servers are asked to mirror it in text; sending it twice would only cost tokens.
        if !carried_by(&texts, &structured) {
            texts.push(structured.to_string());
        }
    }
    let mut content = texts.join("\n");
    if content.is_empty() {
        content = if is_error { "the tool failed without a message" } else { "(no output)" }.into();
    }
    let mut bounded = HeadTail::new(KEEP_BYTES);
    bounded.push(content.as_bytes());
    ToolOutput { content: bounded.render(), is_error, images, ..ToolOutput::default() }
}

/// True when the text blocks already say everything `structured` does: one of them is
/// the same JSON, or every value in it appears in the text.
fn carried_by(texts: &[String], structured: &Value) -> bool {
    if texts.iter().any(|text| serde_json::from_str::<Value>(text).is_ok_and(|v| v == *structured))
    {
        return true;
    }
    let joined = texts.join("\n");
    let mut leaves = Vec::new();
    scalar_leaves(structured, &mut leaves);
    !joined.is_empty() && leaves.iter().all(|leaf| joined.contains(leaf.as_str()))
}

fn scalar_leaves(value: &Value, leaves: &mut Vec<String>) {
    match value {
        Value::Null => {}
        Value::String(text) => leaves.push(text.clone()),
        Value::Bool(_) | Value::Number(_) => leaves.push(value.to_string()),
        Value::Array(items) => items.iter().for_each(|item| scalar_leaves(item, leaves)),
        Value::Object(map) => map.values().for_each(|item| scalar_leaves(item, leaves)),
    }
}

fn kind(block: &ContentBlock) -> String {
    serde_json::to_value(block)
        .ok()
        .and_then(|value| value.get("type").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).expect("a valid CallToolResult")
    }

    #[test]
    fn text_and_images_keep_their_order() {
        let output = tool_output(result(json!({"content": [
            {"type": "text", "text": "before"},
            {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"},
            {"type": "text", "text": "after"},
        ]})));
        assert_eq!(output.content, "before\n[image: image/png]\nafter");
        assert_eq!(
            output.images,
            vec![ToolImage { media_type: "image/png".into(), data: "iVBORw0K".into() }]
        );
        assert!(!output.is_error);
    }

    #[test]
    fn structured_content_is_sent_once() {
        let weather = json!({"temperature": 33, "conditions": "Cloudy"});
        let mirrored = tool_output(result(json!({
            "content": [{"type": "text", "text": weather.to_string()}],
            "structuredContent": weather,
        })));
        assert_eq!(mirrored.content, weather.to_string());
        let alone = tool_output(result(json!({"content": [], "structuredContent": weather})));
        let parsed: Value = serde_json::from_str(&alone.content).expect("JSON text");
        assert_eq!(parsed, weather);
        // The text says it all (a file server's `{content: TEXT}`): not repeated.
        let said = tool_output(result(json!({
            "content": [{"type": "text", "text": "line one\n"}],
            "structuredContent": {"content": "line one\n"},
        })));
        assert_eq!(said.content, "line one\n");
        // The text says something else: the structured values are added as JSON.
        let more = tool_output(result(json!({
            "content": [{"type": "text", "text": "done"}],
            "structuredContent": {"id": 12345},
        })));
        assert_eq!(more.content, "done\n{\"id\":12345}");
    }

    #[test]
    fn is_error_is_kept_and_empty_errors_say_so() {
        let output = tool_output(result(json!({"content": [], "isError": true})));
        assert!(output.is_error);
        assert_eq!(output.content, "the tool failed without a message");
        let text = tool_output(result(
            json!({"content": [{"type": "text", "text": "bad path"}], "isError": true}),
        ));
        assert!(text.is_error);
        assert_eq!(text.content, "bad path");
    }

    #[test]
    fn resources_audio_and_links_become_text() {
        let output = tool_output(result(json!({"content": [
            {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello", "mimeType": "text/plain"}},
            {"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AAAA"}},
            {"type": "resource", "resource": {"uri": "file:///a.png", "blob": "iVBO", "mimeType": "image/png"}},
            {"type": "audio", "data": "UklGR", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "test://static/1", "name": "Resource 1", "description": "a link"},
        ]})));
        assert_eq!(
            output.content,
            "[resource: file:///a.txt]\nhello\n[resource: file:///a.bin, 4 bytes of base64 not shown]\n\
             [image: image/png, resource file:///a.png]\n[audio: audio/wav, 5 bytes of base64 not shown]\n\
             [resource link: Resource 1 <test://static/1>: a link]"
        );
        assert_eq!(output.images.len(), 1);
    }

    #[test]
    fn huge_text_is_bounded() {
        let big = "line\n".repeat(100_000);
        let output = tool_output(result(json!({"content": [{"type": "text", "text": big}]})));
        assert!(output.content.len() < 3 * KEEP_BYTES, "{}", output.content.len());
        assert!(output.content.contains("omitted"));
    }
}
