//! The images a model request carries. Every image of the conversation (read_file, MCP
//! results, prompts) stays in the history and would be re-sent with every request, so a
//! request keeps only the most recent ones within a budget and says, in place of each
//! older one, that it was there and was dropped. Only the request changes: the history
//! and the record keep everything. A model that takes no images gets a note for each.

use kestrel_model::{ContentPart, Message};

/// Images per request. Anthropic's Messages API lowers its per-image limit from 8000 to
/// 2000 px a side when a request has more than 20 images (and older API versions refused
/// more than 20); OpenAI takes up to 500 ("Images and vision" guide).
pub(crate) const MAX_REQUEST_IMAGES: usize = 20;

/// Base64 characters of images per request (about 15 MB of image bytes). Anthropic's
/// Messages API refuses a request over 32 MB (413 `request_too_large`, "Request size
/// limits"); OpenAI takes up to 50 MB of images per request. The rest of the 32 MB is
/// left for the conversation's text and the JSON around it.
pub(crate) const MAX_REQUEST_IMAGE_BASE64: usize = 20_000_000;

/// Said in place of an image to a model that takes none.
pub(crate) const NO_IMAGES_NOTE: &str = "(The image was not sent: the model in use does not \
    take images, according to the model catalog and the provider's `images` setting. \
    Describe what you need from it in other ways, or switch to a model that takes images.)";

/// The messages of a request with images over the budget, the oldest first, replaced by
/// a note: the newest images are kept as long as both the count ([`MAX_REQUEST_IMAGES`])
/// and the size ([`MAX_REQUEST_IMAGE_BASE64`]) allow, and every image older than the
/// first one that does not fit is dropped (so the kept ones are the most recent, in
/// order). Returns the messages and how many images were dropped.
pub(crate) fn within_image_budget(messages: &[Message]) -> (Vec<Message>, usize) {
    let mut kept = 0usize;
    let mut base64 = 0usize;
    let mut full = false;
    let mut dropped = 0usize;
    let mut budgeted: Vec<Message> = messages
        .iter()
        .rev()
        .map(|message| {
            let Message::User { content } = message else { return message.clone() };
            let mut content = content.clone();
            for part in content.iter_mut().rev() {
                let ContentPart::Image { media_type, data } = part else { continue };
                if !full
                    && kept < MAX_REQUEST_IMAGES
                    && base64.saturating_add(data.len()) <= MAX_REQUEST_IMAGE_BASE64
                {
                    kept += 1;
                    base64 += data.len();
                    continue;
                }
                full = true;
                dropped += 1;
                *part = ContentPart::Text(dropped_note(media_type, data.len()));
            }
            Message::User { content }
        })
        .collect();
    budgeted.reverse();
    (budgeted, dropped)
}

/// What the model reads in place of an image dropped from the request.
fn dropped_note(media_type: &str, base64_len: usize) -> String {
    let bytes = base64_len / 4 * 3;
    format!(
        "[image: {media_type}, {} — not sent: dropped from the context because a request \
         carries at most {MAX_REQUEST_IMAGES} images and {} of them, newest first. Read it \
         again, or ask the user for it, if you still need it.]",
        megabytes(bytes),
        megabytes(MAX_REQUEST_IMAGE_BASE64 / 4 * 3),
    )
}

/// `1.2 MB`, or kB below a megabyte.
fn megabytes(bytes: usize) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1_000_000.0)
    } else {
        format!("{} kB", bytes.div_ceil(1_000))
    }
}

/// What the user is told, once per turn, when a request left images out.
pub(crate) fn dropped_notice(dropped: usize) -> String {
    let images = if dropped == 1 { "image was" } else { "images were" };
    format!(
        "{dropped} older {images} left out of the model's context: a request carries at most \
         {MAX_REQUEST_IMAGES} images and {} of them. The model sees a note in their place.",
        megabytes(MAX_REQUEST_IMAGE_BASE64 / 4 * 3)
    )
}

/// The messages with every image part (the user's, or a tool's from when the session
/// used a model that takes images) replaced by a note: such a model's API refuses the
/// whole request otherwise, turn after turn.
pub(crate) fn without_image_parts(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .map(|message| match message {
            Message::User { content } => Message::User {
                content: content
                    .iter()
                    .map(|part| match part {
                        ContentPart::Image { media_type, .. } => {
                            ContentPart::Text(format!("[image: {media_type}] {NO_IMAGES_NOTE}"))
                        }
                        ContentPart::Text(_) => part.clone(),
                    })
                    .collect(),
            },
            Message::Assistant { .. } | Message::ToolResult { .. } => message.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(len: usize) -> ContentPart {
        ContentPart::Image { media_type: "image/png".into(), data: "A".repeat(len) }
    }

    fn images_of(messages: &[Message]) -> Vec<usize> {
        messages
            .iter()
            .flat_map(|message| match message {
                Message::User { content } => content.clone(),
                Message::Assistant { .. } | Message::ToolResult { .. } => Vec::new(),
            })
            .filter_map(|part| match part {
                ContentPart::Image { data, .. } => Some(data.len()),
                ContentPart::Text(_) => None,
            })
            .collect()
    }

    #[test]
    fn the_newest_images_within_the_count_are_kept_in_order() {
        let messages: Vec<Message> = (1..=25)
            .map(|n| Message::User { content: vec![ContentPart::Text("look".into()), image(n)] })
            .collect();
        let (budgeted, dropped) = within_image_budget(&messages);
        assert_eq!(dropped, 5);
        assert_eq!(images_of(&budgeted), (6..=25).collect::<Vec<_>>());
        assert_eq!(budgeted.len(), 25);
        let Message::User { content } = &budgeted[0] else { panic!("a user message") };
        let ContentPart::Text(note) = &content[1] else { panic!("a note: {content:?}") };
        assert!(note.starts_with("[image: image/png, 0 kB — not sent: dropped"), "{note}");
        assert!(note.contains("at most 20 images and 15.0 MB of them"), "{note}");
    }

    #[test]
    fn an_image_that_does_not_fit_drops_every_older_one_too() {
        let big = MAX_REQUEST_IMAGE_BASE64 / 2;
        let messages = vec![
            Message::User { content: vec![image(10)] },
            Message::User { content: vec![image(big), image(big)] },
            Message::User { content: vec![image(big)] },
        ];
        let (budgeted, dropped) = within_image_budget(&messages);
        assert_eq!((images_of(&budgeted), dropped), (vec![big, big], 2));
        // Nothing to drop: the messages are what they were.
        let (same, dropped) = within_image_budget(&messages[..1]);
        assert_eq!((same.as_slice(), dropped), (&messages[..1], 0));
    }

    #[test]
    fn the_notice_counts_the_dropped_images() {
        assert!(dropped_notice(1).starts_with("1 older image was left out"));
        assert!(dropped_notice(3).starts_with("3 older images were left out"));
        assert!(dropped_notice(3).contains("at most 20 images and 15.0 MB"));
    }
}
