//! The images a model request carries. Every image of the conversation (read_file, MCP
//! results, prompts) stays in the history and would be re-sent with every request, so
//! the history keeps only the most recent ones within a budget and says, in place of
//! each older one, that it was there and was dropped: memory stays bounded and no
//! request carries what the budget left out. The record never held image data (it keeps
//! `[image: TYPE]` placeholders). A model that takes no images gets a note for each, in
//! the request only; an image a provider could not process is replaced by a note too.

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

/// Replaces, in `messages` (the history itself), the images over the budget by a note,
/// the oldest first: the newest images are kept as long as both the count
/// ([`MAX_REQUEST_IMAGES`]) and the size ([`MAX_REQUEST_IMAGE_BASE64`]) allow, and every
/// image older than the first one that does not fit is dropped (so the kept ones are the
/// most recent, in order). Returns how many were dropped now: those dropped before are
/// notes already.
pub(crate) fn drop_over_budget(messages: &mut [Message]) -> usize {
    let mut kept = 0usize;
    let mut base64 = 0usize;
    let mut full = false;
    let mut dropped = 0usize;
    for message in messages.iter_mut().rev() {
        let Message::User { content } = message else { continue };
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
    }
    dropped
}

/// Whether a provider's refusal of a request (its message) is about an image the request
/// carried: Anthropic's "Could not process image" and "Image does not match the provided
/// media type", OpenAI's "Invalid image." (`invalid_image`) and "You uploaded an
/// unsupported image" (`image_parse_error`, `invalid_image_format`).
pub(crate) fn is_image_refusal(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    [
        "could not process image",
        "unsupported image",
        "invalid image",
        "invalid_image",
        "image_parse_error",
        "image does not match",
        "image exceeds",
        "image dimensions exceed",
    ]
    .iter()
    .any(|needle| message.contains(needle))
}

/// Replaces the image a provider could not process by a note saying so (`why`), so the
/// next request goes without it: the image at `refused` (its place among the
/// conversation's images, when the provider named it: `kestrel_model::refused_image`),
/// else every image of the newest message that has images. Returns how many images were
/// replaced: 0 when there is none.
pub(crate) fn drop_refused_images(
    messages: &mut [Message],
    refused: Option<usize>,
    why: &str,
) -> usize {
    let mut images = messages
        .iter_mut()
        .filter_map(|message| match message {
            Message::User { content } => Some(content.iter_mut()),
            Message::Assistant { .. } | Message::ToolResult { .. } => None,
        })
        .flatten()
        .filter(|part| matches!(part, ContentPart::Image { .. }));
    if let Some(part) = refused.and_then(|index| images.nth(index)) {
        *part = refused_note(part, why);
        return 1;
    }
    drop_newest_images(messages, why)
}

/// Every image of the newest message that has images, replaced as `drop_refused_images`
/// says; how many.
fn drop_newest_images(messages: &mut [Message], why: &str) -> usize {
    let newest = messages.iter_mut().rev().find_map(|message| match message {
        Message::User { content }
            if content.iter().any(|part| matches!(part, ContentPart::Image { .. })) =>
        {
            Some(content)
        }
        Message::User { .. } | Message::Assistant { .. } | Message::ToolResult { .. } => None,
    });
    let Some(content) = newest else { return 0 };
    let mut dropped = 0;
    for part in content.iter_mut() {
        if matches!(part, ContentPart::Image { .. }) {
            dropped += 1;
            *part = refused_note(part, why);
        }
    }
    dropped
}

/// The note that stands for an image the provider could not process.
fn refused_note(part: &ContentPart, why: &str) -> ContentPart {
    let media_type = match part {
        ContentPart::Image { media_type, .. } => media_type.as_str(),
        ContentPart::Text(_) => "unknown",
    };
    ContentPart::Text(format!(
        "[image: {media_type} — removed: the provider could not process it ({why}). Ask the \
         user for another copy if you still need it.]"
    ))
}

/// What the user is told when a provider could not process images and they were removed.
pub(crate) fn refused_notice(dropped: usize, why: &str) -> String {
    let images = if dropped == 1 { "an image" } else { "images" };
    format!(
        "the provider could not process {images} of the conversation ({why}): removed from \
         the context ({dropped} in all), and the request sent again without them"
    )
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

/// What the user is told at the end of a turn in which the budget dropped images.
pub(crate) fn dropped_notice(dropped: usize) -> String {
    let images = if dropped == 1 { "image was" } else { "images were" };
    format!(
        "{dropped} {images} left out of the context: a request carries at most \
         {MAX_REQUEST_IMAGES} images and {} of them, the newest. The model sees a note in \
         place of each.",
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
        let mut messages: Vec<Message> = (1..=25)
            .map(|n| Message::User { content: vec![ContentPart::Text("look".into()), image(n)] })
            .collect();
        assert_eq!(drop_over_budget(&mut messages), 5);
        assert_eq!(images_of(&messages), (6..=25).collect::<Vec<_>>());
        assert_eq!(messages.len(), 25);
        let Message::User { content } = &messages[0] else { panic!("a user message") };
        let ContentPart::Text(note) = &content[1] else { panic!("a note: {content:?}") };
        assert!(note.starts_with("[image: image/png, 0 kB — not sent: dropped"), "{note}");
        assert!(note.contains("at most 20 images and 15.0 MB of them"), "{note}");
        // Dropped once: the next pass drops nothing new.
        assert_eq!(drop_over_budget(&mut messages), 0);
    }

    #[test]
    fn an_image_that_does_not_fit_drops_every_older_one_too() {
        let big = MAX_REQUEST_IMAGE_BASE64 / 2;
        let mut messages = vec![
            Message::User { content: vec![image(10)] },
            Message::User { content: vec![image(big), image(big)] },
            Message::User { content: vec![image(big)] },
        ];
        let mut small = messages[..1].to_vec();
        assert_eq!(drop_over_budget(&mut messages), 2);
        assert_eq!(images_of(&messages), vec![big, big]);
        // Nothing to drop: the messages are what they were.
        assert_eq!(drop_over_budget(&mut small), 0);
        assert_eq!(small.as_slice(), &[Message::User { content: vec![image(10)] }]);
    }

    #[test]
    fn the_notice_counts_the_dropped_images() {
        assert!(dropped_notice(1).starts_with("1 image was left out of the context"));
        assert!(dropped_notice(3).starts_with("3 images were left out of the context"));
        assert!(dropped_notice(3).contains("at most 20 images and 15.0 MB"));
    }

    #[test]
    fn an_image_refusal_is_told_from_other_refusals() {
        assert!(is_image_refusal("Could not process image"));
        assert!(is_image_refusal("Invalid image."));
        assert!(is_image_refusal("You uploaded an unsupported image. Please make sure..."));
        assert!(!is_image_refusal("max_tokens: Field required"));
    }

    #[test]
    fn only_the_newest_message_with_images_loses_them() {
        let mut messages = vec![
            Message::User { content: vec![image(1)] },
            Message::User { content: vec![ContentPart::Text("a".into()), image(2), image(3)] },
            Message::User { content: vec![ContentPart::Text("no image".into())] },
        ];
        assert_eq!(drop_refused_images(&mut messages, None, "Could not process image"), 2);
        assert_eq!(images_of(&messages), vec![1]);
        let mut none = vec![Message::User { content: vec![ContentPart::Text("a".into())] }];
        assert_eq!(drop_refused_images(&mut none, None, "x"), 0);
    }

    #[test]
    fn a_refused_image_the_provider_named_is_the_only_one_removed() {
        let mut messages = vec![
            Message::User { content: vec![image(1), ContentPart::Text("a".into()), image(2)] },
            Message::User { content: vec![image(3)] },
        ];
        assert_eq!(drop_refused_images(&mut messages, Some(1), "bad"), 1);
        assert_eq!(images_of(&messages), vec![1, 3]);
        // A place past the last image: the newest message's images, as without one.
        assert_eq!(drop_refused_images(&mut messages, Some(7), "bad"), 1);
        assert_eq!(images_of(&messages), vec![1]);
    }
}
