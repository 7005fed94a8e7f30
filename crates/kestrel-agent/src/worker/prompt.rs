//! An ACP prompt (content blocks) as the model's user message: text as text, images as
//! images, resource links as a markdown link, embedded text resources inline with their
//! URI. Inline pieces join into one text, as the user typed them. An image no provider
//! would take is left out with a note in its place, so the user's text still goes.

use kestrel_model::ContentPart;
use kestrel_protocol::acp;

/// A prompt as the model's content, and what the user must be told about it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptContent {
    pub(crate) parts: Vec<ContentPart>,
    /// Each image left out: its type (and URI) and why.
    pub(crate) left_out: Vec<String>,
}

impl PromptContent {
    /// What the user is told for each image left out.
    pub(crate) fn notices(&self) -> Vec<String> {
        self.left_out
            .iter()
            .map(|why| {
                format!("an image in the prompt was not sent ({why}); the rest of the prompt was")
            })
            .collect()
    }
}

/// The model content of a prompt. An image no provider takes (see
/// `kestrel_tools::checked_image`: no data, SVG, BMP, too large, cut off; one declared as
/// another of the four types goes under its real type) is replaced by a note saying why,
/// for the model and the record, and named in `left_out`. Fails, with a message for the
/// client, on an empty prompt (or one with nothing but such images) and content the
/// models cannot take (audio, unknown block types).
pub(crate) fn content_parts(blocks: &[acp::ContentBlock]) -> Result<PromptContent, String> {
    let mut parts = Vec::new();
    let mut left_out = Vec::new();
    let mut text = String::new();
    // Whether the prompt holds anything but notes on left-out images.
    let mut asked = false;
    for block in blocks {
        // Every block but blank text and a left-out image is something asked.
        asked |= match block {
            acp::ContentBlock::Text(content) => !content.text.trim().is_empty(),
            acp::ContentBlock::Image(_) | acp::ContentBlock::Resource(_) => false,
            _ => true,
        };
        match block {
            acp::ContentBlock::Text(content) => text.push_str(&content.text),
            acp::ContentBlock::ResourceLink(link) => {
                text.push_str(&format!("[{}]({})", link.name, link.uri))
            }
            acp::ContentBlock::Resource(embedded) => match &embedded.resource {
                acp::EmbeddedResourceResource::TextResourceContents(resource) => {
                    asked = true;
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
                            let name = format!("{mime}, {}", resource.uri);
                            asked |= image(mime, &resource.blob, &name, &mut text, &mut parts)
                                .map_err(|why| left_out.push(why))
                                .is_ok();
                        }
                        Some(_) | None => {
                            asked = true;
                            text.push_str(&format!(
                                "[binary resource {} left out: only text and images can be sent]",
                                resource.uri
                            ))
                        }
                    }
                }
                _ => return Err("the prompt has an embedded resource of an unknown kind".into()),
            },
            acp::ContentBlock::Image(block) => {
                let name = match &block.uri {
                    Some(uri) => format!("{}, {uri}", block.mime_type),
                    None => block.mime_type.clone(),
                };
                asked |= image(&block.mime_type, &block.data, &name, &mut text, &mut parts)
                    .map_err(|why| left_out.push(why))
                    .is_ok();
            }
            acp::ContentBlock::Audio(_) => {
                return Err("audio prompts are not supported: send text or images".into());
            }
            _ => return Err("the prompt has a content block of an unknown type".into()),
        }
    }
    flush(&mut text, &mut parts);
    if !asked {
        return Err(match left_out.first() {
            Some(why) => format!("an image in the prompt cannot be sent: {why}"),
            None => "the prompt is empty".into(),
        });
    }
    Ok(PromptContent { parts, left_out })
}

/// An image of the prompt, checked as tool images are: one a provider refuses would stay
/// in the history and fail every later request, so it is left out, with a note in its
/// place that says why. `name` is its type and URI. Fails, when it is left out, with
/// `name` and why.
fn image(
    mime: &str,
    data: &str,
    name: &str,
    text: &mut String,
    parts: &mut Vec<ContentPart>,
) -> Result<(), String> {
    match kestrel_tools::checked_image(mime, data) {
        Ok(image) => {
            flush(text, parts);
            parts.push(ContentPart::Image { media_type: image.media_type, data: image.data });
            Ok(())
        }
        Err(why) => {
            if !text.is_empty() && !text.ends_with(char::is_whitespace) {
                text.push('\n');
            }
            text.push_str(&format!("[image: {name} — left out of the prompt: {why}]\n"));
            Err(format!("{name}: {why}"))
        }
    }
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
        let content = content_parts(&prompt).unwrap();
        assert!(content.left_out.is_empty());
        assert_eq!(
            content.parts,
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
    fn images_no_provider_takes_are_left_out_with_a_note_and_the_text_is_kept() {
        let cases = [
            ("image/svg+xml", "PHN2Zy8+", "not an image type models take"),
            ("image/bmp", "Qk0=", "not an image type models take"),
            ("image/png", "not base64", "not valid base64"),
            ("image/png", "", "the image has no data"),
        ];
        for (mime, data, expected) in cases {
            let prompt = blocks(json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image", "mimeType": mime, "data": data},
                {"type": "text", "text": "thanks"}
            ]));
            let content = content_parts(&prompt).unwrap();
            let [ContentPart::Text(text)] = content.parts.as_slice() else {
                panic!("{mime}: one text: {:?}", content.parts)
            };
            assert!(text.starts_with("what is this?\n[image: "), "{mime}: {text}");
            assert!(text.contains("left out of the prompt") && text.contains(expected), "{text}");
            assert!(text.ends_with("]\nthanks"), "{text}");
            assert!(data.is_empty() || !text.contains(data), "{mime}: no data sent: {text}");
            let notices = content.notices();
            assert_eq!(notices.len(), 1, "{mime}");
            assert!(notices[0].starts_with("an image in the prompt was not sent ("), "{notices:?}");
            assert!(notices[0].contains(mime) && notices[0].contains(expected), "{notices:?}");

            // With nothing else to send, the prompt is refused saying why.
            let alone = blocks(json!([{"type": "image", "mimeType": mime, "data": data}]));
            let error = content_parts(&alone).unwrap_err();
            assert!(error.starts_with("an image in the prompt cannot be sent: "), "{error}");
            assert!(error.contains(expected), "{mime}: {error}");
        }
        let blob = blocks(json!([
            {"type": "text", "text": "see"},
            {"type": "resource", "resource":
                {"uri": "file:///w/a.bmp", "blob": "Qk0=", "mimeType": "image/bmp"}},
            {"type": "image", "mimeType": "image/png", "data": PNG}
        ]));
        let content = content_parts(&blob).unwrap();
        assert_eq!(content.parts.len(), 2, "{:?}", content.parts);
        let ContentPart::Text(text) = &content.parts[0] else { panic!("{:?}", content.parts) };
        assert!(text.contains("[image: image/bmp, file:///w/a.bmp — left out"), "{text}");
        assert!(matches!(&content.parts[1], ContentPart::Image { .. }));
        assert!(content.notices()[0].contains("image/bmp, file:///w/a.bmp"));
    }

    #[test]
    fn an_image_declared_as_another_type_goes_as_what_its_bytes_are() {
        let prompt = blocks(json!([
            {"type": "text", "text": "what is this?"},
            {"type": "image", "mimeType": "image/jpeg", "data": PNG},
        ]));
        let content = content_parts(&prompt).unwrap();
        assert!(content.left_out.is_empty(), "{:?}", content.left_out);
        assert_eq!(
            content.parts[1],
            ContentPart::Image { media_type: "image/png".into(), data: PNG.into() }
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
