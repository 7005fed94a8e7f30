//! Which image a provider's refusal is about. Anthropic names the block it could not
//! take (`messages.2.content.1.image.source.base64: ...`); other APIs may say
//! `messages[2].content[1]` or `input.2.content.1`. The position is in the request body
//! as sent, where messages are merged and reordered per wire API, so it is looked up in
//! that body: the answer is the image's place among all the images of the conversation
//! (bodies keep the conversation's images in order).

use crate::types::{Message, ModelRequest, WireApi};
use crate::{anthropic, chat, responses};
use serde_json::Value;

/// Block types that carry an image, over the three wire APIs.
const IMAGE_BLOCKS: [&str; 3] = ["image", "image_url", "input_image"];

/// The index, among the image parts of `messages` in order, of the image the provider's
/// `refusal` names; `None` when it names no position, or one that holds no image.
pub fn refused_image(wire: WireApi, messages: &[Message], refusal: &str) -> Option<usize> {
    let (list, message, part) = position(refusal)?;
    let request = ModelRequest {
        model: String::new(),
        // Sessions always have one; a chat body then starts with it.
        system: "system".into(),
        messages: messages.to_vec(),
        tools: Vec::new(),
        reasoning: None,
        max_output_tokens: None,
        cache_key: None,
    };
    let bytes = match wire {
        WireApi::Chat => chat::body(&request).to_bytes(),
        WireApi::Responses => responses::body(&request).to_bytes(),
        WireApi::Anthropic => anthropic::body(&request).to_bytes(),
    }
    .ok()?;
    let body: Value = serde_json::from_slice(&bytes).ok()?;
    let items = body.get(list)?.as_array()?;
    let is_image = |block: &Value| {
        block.get("type").and_then(Value::as_str).is_some_and(|kind| IMAGE_BLOCKS.contains(&kind))
    };
    let blocks = |item: &Value| -> Vec<Value> {
        item.get("content").and_then(Value::as_array).cloned().unwrap_or_default()
    };
    let named = blocks(items.get(message)?);
    if !is_image(named.get(part)?) {
        return None;
    }
    let before: usize = items[..message]
        .iter()
        .map(|item| blocks(item).iter().filter(|b| is_image(b)).count())
        .sum();
    Some(before + named[..part].iter().filter(|block| is_image(block)).count())
}

/// `(list, message, part)` from the first `messages.N.content.M` (or `messages[N].
/// content[M]`, `input.N...`) in `refusal`.
fn position(refusal: &str) -> Option<(&'static str, usize, usize)> {
    for list in ["messages", "input"] {
        let mut rest = refusal;
        while let Some(found) = rest.find(list) {
            rest = &rest[found + list.len()..];
            if let Some((message, after)) = number(rest)
                && let Some(after) = after.trim_start_matches(['.', ']']).strip_prefix("content")
                && let Some((part, _)) = number(after)
            {
                return Some((list, message, part));
            }
        }
    }
    None
}

/// A number after separators (`.`, `[`), and what follows it.
fn number(text: &str) -> Option<(usize, &str)> {
    let text = text.trim_start_matches(['.', '[']);
    let digits = text.len() - text.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    Some((text[..digits].parse().ok()?, &text[digits..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ContentPart;

    fn image(name: &str) -> ContentPart {
        ContentPart::Image { media_type: "image/png".into(), data: name.into() }
    }

    fn conversation() -> Vec<Message> {
        vec![
            Message::User {
                content: vec![ContentPart::Text("look".into()), image("a"), image("b")],
            },
            Message::Assistant { text: "seen".into(), reasoning: None, tool_calls: Vec::new() },
            Message::User { content: vec![image("c"), ContentPart::Text("and this".into())] },
        ]
    }

    #[test]
    fn anthropic_positions_name_the_image_in_its_turn() {
        let refusal = "messages.0.content.2.image.source.base64.data: Image does not match the \
                       provided media type image/png";
        assert_eq!(refused_image(WireApi::Anthropic, &conversation(), refusal), Some(1));
        let third = "messages.2.content.0.image.source.base64: image exceeds 5 MB maximum";
        assert_eq!(refused_image(WireApi::Anthropic, &conversation(), third), Some(2));
    }

    #[test]
    fn chat_positions_count_the_system_message() {
        // Chat puts the system prompt first: the first user message is messages[1].
        let refusal = "Invalid image at messages[1].content[1]";
        assert_eq!(refused_image(WireApi::Chat, &conversation(), refusal), Some(0));
    }

    #[test]
    fn refusals_without_a_position_or_pointing_at_text_name_nothing() {
        assert_eq!(
            refused_image(WireApi::Anthropic, &conversation(), "Could not process image"),
            None
        );
        let text = "messages.0.content.0: bad text";
        assert_eq!(refused_image(WireApi::Anthropic, &conversation(), text), None);
        let beyond = "messages.9.content.0: gone";
        assert_eq!(refused_image(WireApi::Anthropic, &conversation(), beyond), None);
    }
}
