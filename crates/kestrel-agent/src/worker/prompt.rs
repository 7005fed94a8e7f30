//! An ACP prompt (content blocks) as the model's user message: text as text, images as
//! images, resource links as a markdown link, embedded text resources inline with their
//! URI. Inline pieces join into one text, as the user typed them.

use kestrel_model::ContentPart;
use kestrel_protocol::acp;

/// The model content of a prompt. Fails, with a message for the client, on an empty
/// prompt and on content the models cannot take (audio, an image without data or one
/// no provider takes: see `kestrel_tools::checked_image`).
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
                            parts.push(image_part(mime, &resource.blob)?);
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
                parts.push(image_part(&image.mime_type, &image.data)?);
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

/// An image of the prompt, checked as tool images are: one a provider refuses would stay
/// in the history and fail every later request, so the prompt is refused instead.
fn image_part(mime: &str, data: &str) -> Result<ContentPart, String> {
    let image = kestrel_tools::checked_image(mime, data)
        .map_err(|why| format!("an image in the prompt cannot be sent: {why}"))?;
    Ok(ContentPart::Image { media_type: image.media_type, data: image.data })
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
            {"type": "image", "mimeType": "image/png", "data": PNG},
            {"type": "text", "text": "and this"}
        ]));
        assert_eq!(
            content_parts(&prompt).unwrap(),
            [
                ContentPart::Text(
                    "look at [a.rs](file:///w/a.rs)\n<resource uri=\"file:///w/b.rs\">\nfn b() {}\n</resource>\n"
                        .into()
                ),
                ContentPart::Image { media_type: "image/png".into(), data: PNG.into() },
                ContentPart::Text("and this".into()),
            ]
        );
    }

    /// A 1×1 PNG, base64.
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";

    #[test]
    fn images_no_provider_takes_are_refused_saying_why() {
        let cases = [
            ("image/svg+xml", PNG, "not an image type models take"),
            ("image/jpg", PNG, "not an image type models take"),
            ("image/png", "not base64", "not valid base64"),
            ("image/jpeg", PNG, "not the declared image/jpeg"),
        ];
        for (mime, data, expected) in cases {
            let prompt = blocks(json!([{"type": "image", "mimeType": mime, "data": data}]));
            let error = content_parts(&prompt).unwrap_err();
            assert!(error.starts_with("an image in the prompt cannot be sent: "), "{error}");
            assert!(error.contains(expected), "{mime}: {error}");
        }
        let blob = blocks(json!([{"type": "resource", "resource":
            {"uri": "file:///w/a.bmp", "blob": PNG, "mimeType": "image/bmp"}}]));
        assert!(content_parts(&blob).unwrap_err().contains("not an image type models take"));
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
