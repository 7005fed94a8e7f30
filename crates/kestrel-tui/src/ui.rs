//! One frame: the transcript on top, the working line and queued prompts, the composer
//! (or the permission prompt) and the status line at the bottom; menus and pickers
//! float just above the composer.

use crate::app::App;
use crate::keys::Menu;
use crate::theme;
use crate::wrap::truncate_spans;
use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Widget};

/// Queued prompts listed above the composer.
const QUEUE_LINES: usize = 3;
const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

pub(crate) fn draw(frame: &mut Frame<'_>, app: &mut App) {
    let area = frame.area();
    if area.width < 8 || area.height < 4 {
        Line::from("…").render(area, frame.buffer_mut());
        return;
    }
    let queued = app.queue.len().min(QUEUE_LINES);
    let working = usize::from((app.turn.is_some() || app.compacting) && app.approvals.is_empty());
    let middle = u16::try_from(queued + working).unwrap_or(0);
    let room = area.height.saturating_sub(1 + middle);
    // Text typed while a prompt is up stays in the composer, shown under the prompt.
    let draft = match app.approvals.front() {
        Some(_) if !app.composer.is_empty() => {
            (app.composer.rows(area.width.saturating_sub(2)) + 2).min(room / 3)
        }
        Some(_) | None => 0,
    };
    let bottom_height = match app.approvals.front() {
        // A prompt may take every row but the status line's (and a draft's): what it
        // asks about must not be cut off to keep the transcript in view.
        Some(approval) => approval.height(area.width).min(room - draft) + draft,
        None => app.composer.rows(area.width.saturating_sub(2)) + 2,
    };
    let [transcript_area, middle_area, bottom_area, status_area] =
        stack(area, middle, bottom_height);
    let buffer = frame.buffer_mut();
    app.transcript.draw(transcript_area, buffer);
    draw_middle(app, middle_area, buffer);
    match app.approvals.front() {
        Some(approval) => {
            let draft = draft.min(bottom_area.height);
            let prompt = Rect { height: bottom_area.height - draft, ..bottom_area };
            approval.draw(prompt, buffer);
            if draft > 0 {
                let y = prompt.y + prompt.height;
                draw_composer(app, Rect { y, height: draft, ..bottom_area }, buffer);
            }
        }
        None => draw_composer(app, bottom_area, buffer),
    }
    let status = app.status.line(usize::from(status_area.width));
    status.render(status_area, buffer);
    if app.approvals.is_empty() {
        if let Some(picker) = &app.picker {
            let height = picker.height().min(transcript_area.height);
            let popup = above(bottom_area, height, transcript_area);
            picker.draw(popup, buffer);
        } else if let Some(view) = &app.swarm {
            let height = crate::swarm_table::height(view).min(transcript_area.height);
            let popup = above(bottom_area, height, transcript_area);
            crate::swarm_table::draw(view, popup, buffer);
        } else if let Some(menu) = app.menu() {
            draw_menu(app, &menu, bottom_area, transcript_area, buffer);
        }
    }
}

/// The frame's rows from the top: the transcript (what is left), the working line and
/// queue (`middle`), the composer or prompt (`bottom`), the status line. Plain
/// arithmetic rather than `Layout`: its constraint solver was a sixth of a frame's
/// work, the first frame's included. When rows run short the status line stays, then
/// the bottom, then the middle.
fn stack(area: Rect, middle: u16, bottom: u16) -> [Rect; 4] {
    let status = area.height.min(1);
    let bottom = bottom.min(area.height - status);
    let middle = middle.min(area.height - status - bottom);
    let transcript = area.height - status - bottom - middle;
    let row = |offset: u16, height: u16| Rect { y: area.y + offset, height, ..area };
    [
        row(0, transcript),
        row(transcript, middle),
        row(transcript + middle, bottom),
        row(transcript + middle + bottom, status),
    ]
}

/// A rectangle of `height` rows ending just above `anchor`, within `bounds`.
fn above(anchor: Rect, height: u16, bounds: Rect) -> Rect {
    let height = height.min(anchor.y.saturating_sub(bounds.y));
    Rect { x: anchor.x, y: anchor.y - height, width: anchor.width, height }
}

fn draw_middle(app: &App, area: Rect, buffer: &mut Buffer) {
    let mut row = area.y;
    if let Some(turn) = &app.turn
        && app.approvals.is_empty()
    {
        let elapsed = turn.started.elapsed();
        let frame = (elapsed.as_millis() / 120) as usize % SPINNER.len();
        let label = if turn.interrupted { "Interrupting" } else { "Working" };
        let keys = if app.composer.is_empty() {
            "esc to interrupt"
        } else {
            "enter queues · tab sends now · esc to interrupt"
        };
        let line = Line::from(vec![
            Span::styled(format!(" {} ", SPINNER[frame]), theme::accent()),
            Span::styled(label, theme::bold()),
            Span::styled(format!(" {}s · {keys}", elapsed.as_secs()), theme::dim()),
        ]);
        line.render(Rect { y: row, height: 1, ..area }, buffer);
        row += 1;
    } else if app.compacting && app.approvals.is_empty() {
        let line = Line::from(vec![
            Span::styled(" ⠿ ", theme::accent()),
            Span::styled("Compacting", theme::bold()),
            Span::styled(" the conversation · esc to stop", theme::dim()),
        ]);
        line.render(Rect { y: row, height: 1, ..area }, buffer);
        row += 1;
    }
    for prompt in app.queue.iter().take(QUEUE_LINES) {
        let text = &prompt.text;
        if row >= area.y + area.height {
            break;
        }
        let first = text.lines().next().unwrap_or_default().to_owned();
        let spans = vec![Span::styled(" ↳ queued: ", theme::dim()), Span::raw(first)];
        Line::from(truncate_spans(spans, usize::from(area.width)))
            .render(Rect { y: row, height: 1, ..area }, buffer);
        row += 1;
    }
}

fn draw_composer(app: &App, area: Rect, buffer: &mut Buffer) {
    let block = Block::default().borders(Borders::TOP | Borders::BOTTOM).border_style(theme::dim());
    let inner = block.inner(area);
    block.render(area, buffer);
    if inner.height == 0 {
        return;
    }
    Span::styled("› ", theme::accent()).render(Rect { width: 2, height: 1, ..inner }, buffer);
    let text_area = Rect { x: inner.x + 2, width: inner.width.saturating_sub(2), ..inner };
    app.composer.draw(text_area, buffer);
}

fn draw_menu(app: &App, menu: &Menu, composer: Rect, bounds: Rect, buffer: &mut Buffer) {
    let rows: Vec<Line<'static>> = match menu {
        Menu::Slash(items) => items
            .iter()
            .map(|item| {
                Line::from(vec![
                    Span::raw(format!("/{:<12}", item.name)),
                    Span::styled(item.description.clone(), theme::dim()),
                ])
            })
            .collect(),
        Menu::Mention(files) => files.iter().map(|file| Line::from(format!("@{file}"))).collect(),
    };
    let visible = rows.len().min(8);
    let height = u16::try_from(visible + 2).unwrap_or(10);
    let popup = above(composer, height, bounds);
    if popup.height < 3 {
        return;
    }
    Clear.render(popup, buffer);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme::dim());
    let inner = block.inner(popup);
    block.render(popup, buffer);
    let selected = app.menu_selected.min(rows.len().saturating_sub(1));
    let first = selected.saturating_sub(usize::from(inner.height).saturating_sub(1));
    for (row, (index, line)) in rows.into_iter().enumerate().skip(first).enumerate() {
        if row >= usize::from(inner.height) {
            break;
        }
        let chosen = index == selected;
        let mut spans = vec![Span::styled(if chosen { "› " } else { "  " }, theme::selected())];
        spans.extend(line.spans.into_iter().map(|span| {
            if chosen && span.style == ratatui::style::Style::default() {
                Span::styled(span.content, theme::selected())
            } else {
                span
            }
        }));
        let y = inner.y + u16::try_from(row).unwrap_or(0);
        Line::from(truncate_spans(spans, usize::from(inner.width)))
            .render(Rect { x: inner.x, y, width: inner.width, height: 1 }, buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rows_stack_and_give_way_from_the_top() {
        let area = Rect::new(0, 2, 80, 30);
        let [transcript, middle, bottom, status] = stack(area, 2, 5);
        assert_eq!((transcript.y, transcript.height), (2, 22));
        assert_eq!((middle.y, middle.height), (24, 2));
        assert_eq!((bottom.y, bottom.height), (26, 5));
        assert_eq!((status.y, status.height), (31, 1));
        let [transcript, middle, bottom, status] = stack(Rect::new(0, 0, 80, 6), 4, 5);
        assert_eq!([transcript.height, middle.height, bottom.height, status.height], [0, 0, 5, 1]);
        let [.., bottom, status] = stack(Rect::new(0, 0, 80, 1), 0, 3);
        assert_eq!([bottom.height, status.height], [0, 1]);
    }
}
