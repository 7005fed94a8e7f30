//! An MCP `tools/call` result as a [`ToolOutput`]: text blocks as text, images as image
//! parts (with a placeholder in the text where each stood), embedded resources and links
//! as text, `structuredContent` as JSON text unless a text block already carries it, and
//! `isError` as `is_error`. Text is bounded like a command's output.

use crate::output::HeadTail;
use crate::{ToolImage, ToolOutput, checked_image};
use serde::Deserialize;
use serde_json::Value;

/// Bytes of text kept from the start and from the end of a long result, each.
const KEEP_BYTES: usize = 64 * 1024;

/// `CallToolResult`; blocks stay JSON so that one of an unknown type is reported, not
/// refused.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallToolResult {
    #[serde(default)]
    content: Vec<Value>,
    structured_content: Option<Value>,
    is_error: Option<bool>,
}

/// Maps a result faithfully; nothing the server sent is silently dropped.
pub(crate) fn tool_output(result: Value) -> ToolOutput {
    let result: CallToolResult = match serde_json::from_value(result) {
        Ok(result) => result,
        Err(error) => {
            return ToolOutput::error(format!("the server's answer is not a tool result: {error}"));
        }
    };
    let is_error = result.is_error.unwrap_or(false);
    let mut texts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in &result.content {
        let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or_default();
        match field("type") {
            "text" => texts.push(field("text").to_string()),
            "image" => image(field("mimeType"), field("data"), None, &mut texts, &mut images),
            "audio" => texts.push(format!(
                "[audio: {}, {} bytes of base64 not shown]",
                field("mimeType"),
                field("data").len()
            )),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                let part = |name: &str| resource.get(name).and_then(Value::as_str);
                let uri = part("uri").unwrap_or_default();
                match (part("text"), part("blob"), part("mimeType")) {
                    (Some(text), _, _) => texts.push(format!("[resource: {uri}]\n{text}")),
                    (None, Some(blob), Some(mime)) if mime.starts_with("image/") => {
                        image(mime, blob, Some(uri), &mut texts, &mut images);
                    }
                    (None, Some(blob), _) => texts.push(format!(
                        "[resource: {uri}, {} bytes of base64 not shown]",
                        blob.len()
                    )),
                    (None, None, _) => texts.push(format!("[resource: {uri}, no contents]")),
                }
            }
            "resource_link" => {
                let mut line = format!("[resource link: {} <{}>", field("name"), field("uri"));
                if let Some(mime) = block.get("mimeType").and_then(Value::as_str) {
                    line.push_str(&format!(", {mime}"));
                }
                if let Some(description) = block.get("description").and_then(Value::as_str) {
                    line.push_str(&format!(": {description}"));
                }
                line.push(']');
                texts.push(line);
            }
            // A content type newer than this client: say so rather than drop it.
            other => texts.push(format!("[content this client cannot show: {other}]")),
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

/// An image block: its placeholder, and the image when a provider would take it (an
/// image it refuses would stay in the history and fail every later request), else a
/// note saying why it is not shown.
fn image(
    mime: &str,
    data: &str,
    resource: Option<&str>,
    texts: &mut Vec<String>,
    images: &mut Vec<ToolImage>,
) {
    let source = resource.map(|uri| format!(", resource {uri}")).unwrap_or_default();
    match checked_image(mime, data) {
        Ok(image) => {
            texts.push(format!("[image: {}{source}]", image.media_type));
            images.push(image);
        }
        Err(why) => texts.push(format!("[image: {mime}{source}, not shown: {why}]")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: Value) -> Value {
        value
    }

    /// A 1×1 PNG, base64.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";

    #[test]
    fn images_a_provider_would_refuse_become_notes() {
        let output = tool_output(result(json!({"content": [
            {"type": "image", "data": "PHN2Zy8+", "mimeType": "image/svg+xml"},
            {"type": "image", "data": "Qk0=", "mimeType": "image/jpg"},
            {"type": "image", "data": "%%", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a.bmp", "blob": "Qk0=", "mimeType": "image/bmp"}},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
        ]})));
        assert!(output.images.len() == 1 && output.images[0].data == PNG, "{:?}", output.images);
        let lines: Vec<&str> = output.content.lines().collect();
        assert!(lines[0].starts_with("[image: image/svg+xml, not shown: "), "{}", lines[0]);
        assert!(lines[1].contains("image/jpg, not shown: \"image/jpg\" is not an image type"));
        assert!(lines[2].contains("not shown: the image data is not valid base64"), "{}", lines[2]);
        assert!(lines[3].starts_with("[image: image/bmp, resource file:///a.bmp, not shown"));
        assert_eq!(lines[4], "[image: image/png]");
    }

    #[test]
    fn text_and_images_keep_their_order() {
        let output = tool_output(result(json!({"content": [
            {"type": "text", "text": "before"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "text", "text": "after"},
        ]})));
        assert_eq!(output.content, "before\n[image: image/png]\nafter");
        assert_eq!(
            output.images,
            vec![ToolImage { media_type: "image/png".into(), data: PNG.into() }]
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
            {"type": "resource", "resource": {"uri": "file:///a.png", "blob": PNG, "mimeType": "image/png"}},
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
    fn an_answer_that_is_not_a_result_is_an_error_and_unknown_blocks_are_named() {
        let output = tool_output(json!("surprise"));
        assert!(output.is_error);
        assert!(output.content.starts_with("the server's answer is not a tool result"));
        let output = tool_output(json!({"content": [{"type": "hologram"}]}));
        assert_eq!(output.content, "[content this client cannot show: hologram]");
    }

    #[test]
    fn huge_text_is_bounded() {
        let big = "line\n".repeat(100_000);
        let output = tool_output(result(json!({"content": [{"type": "text", "text": big}]})));
        assert!(output.content.len() < 3 * KEEP_BYTES, "{}", output.content.len());
        assert!(output.content.contains("omitted"));
    }
}
