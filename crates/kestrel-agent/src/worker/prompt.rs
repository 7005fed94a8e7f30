//! An ACP prompt (content blocks) as the model's user message: text as text, images as
//! images, resource links as a markdown link, embedded text resources inline with their
//! URI. Inline pieces join into one text, as the user typed them.

use kestrel_model::ContentPart;
use kestrel_protocol::acp;

/// The model content of a prompt. Fails, with a message for the client, on an empty
/// prompt and on content the models cannot take (audio, an image without data).
pub(crate) fn content_parts(blocks: &[acp::ContentBlock]) -> Result<Vec<ContentPart>, String> {
    let mut parts = Vec::new();
    let mut text = String::new();
    for block in blocks {
        match block {
            acp::ContentBlock::Text(content) => text.push_str(&content.text),
            acp::ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[{}]({})", link.name, link.uri))
            }
            acp::ContentBlock::Resource(embedded) => match &embedded.resource {
                acp::EmbeddedResourceResource::TextResourceContents(resource) => {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&format!(
                        "<resource uri=\"{}\">\n{}\n</resource>\n",
                        resource.uri,
                        resource.text.trim_end_matches('\n')
                    ));
                }
                acp::EmbeddedResourceResource::BlobResourceContents(resource) => {
                    match resource.mime_type.as_deref() {
                        Some(mime) if mime.starts_with("image/") => {
                            flush(&mut text, &mut parts);
                            parts.push(ContentPart::Image {
                                media_type: mime.to_string(),
                                data: resource.blob.clone(),
                            });
                        }
                        Some(_) | None => text.push_str(&format!(
                            "[binary resource {} left out: only text and images can be sent]",
                            resource.uri
                        )),
                    }
                }
                _ => return Err("the prompt has an embedded resource of an unknown kind".into()),
            },
            acp::ContentBlock::Image(image) => {
                if image.data.is_empty() {
                    return Err(
                        "an image in the prompt has no data: send it base64-encoded in `data`"
                            .into(),
                    );
                }
                flush(&mut text, &mut parts);
                parts.push(ContentPart::Image {
                    media_type: image.mime_type.clone(),
                    data: image.data.clone(),
                });
            }
            acp::ContentBlock::Audio(_) => {
                return Err("audio prompts are not supported: send text or images".into());
            }
            _ => return Err("the prompt has a content block of an unknown type".into()),
        }
    }
    flush(&mut text, &mut parts);
    let has_text = parts.iter().any(|part| match part {
        ContentPart::Text(text) => !text.trim().is_empty(),
        ContentPart::Image { .. } => true,
    });
    if !has_text {
        return Err("the prompt is empty".into());
    }
    Ok(parts)
}

fn flush(text: &mut String, parts: &mut Vec<ContentPart>) {
    if !text.is_empty() {
        parts.push(ContentPart::Text(std::mem::take(text)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks(value: serde_json::Value) -> Vec<acp::ContentBlock> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_links_and_resources_join_and_images_stay_apart() {
        let prompt = blocks(json!([
            {"type": "text", "text": "look at "},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///w/a.rs"},
            {"type": "resource", "resource": {"uri": "file:///w/b.rs", "text": "fn b() {}\n"}},
            {"type": "image", "mimeType": "image/png", "data": "iVBO"},
            {"type": "text", "text": "and this"}
        ]));
        assert_eq!(
            content_parts(&prompt).unwrap(),
            [
                ContentPart::Text(
                    "look at [a.rs](file:///w/a.rs)\n<resource uri=\"file:///w/b.rs\">\nfn b() {}\n</resource>\n"
                        .into()
                ),
                ContentPart::Image { media_type: "image/png".into(), data: "iVBO".into() },
                ContentPart::Text("and this".into()),
            ]
        );
    }

    #[test]
    fn empty_and_audio_prompts_are_refused() {
        assert_eq!(content_parts(&[]).unwrap_err(), "the prompt is empty");
        let blank = blocks(json!([{"type": "text", "text": "  "}]));
        assert_eq!(content_parts(&blank).unwrap_err(), "the prompt is empty");
        let audio = blocks(json!([{"type": "audio", "mimeType": "audio/wav", "data": "x"}]));
        assert!(content_parts(&audio).unwrap_err().contains("audio"));
    }
}
