use super::*;
use kestrel_protocol::SessionId;
use kestrel_store::{RunSummary, SkippedEvents, TokenCounts};
use ratatui::style::Color;

fn task(id: &str, state: TaskState, session: Option<&str>) -> TaskStatus {
    let started = state != TaskState::Waiting;
    TaskStatus {
        id: id.into(),
        state,
        attempts: u32::from(started),
        cost_usd: if started { 0.0123 } else { 0.0 },
        tokens: if started {
            TokenCounts { input: 12_345, output: 678 }
        } else {
            TokenCounts::default()
        },
        model: started.then(|| "openai/gpt-5.1-codex".into()),
        session: session.map(SessionId::from_string),
        elapsed_s: if started { 125 } else { 0 },
    }
}

fn status(tasks: Vec<TaskStatus>) -> RunStatus {
    RunStatus {
        run: "0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000".into(),
        state: RunState::Running,
        branch: Some("kestrel/0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000".into()),
        cost_usd: 0.0369,
        tasks,
        roles: Vec::new(),
        skipped_events: SkippedEvents::default(),
    }
}

fn summary(run: &str) -> RunSummary {
    RunSummary {
        run: run.into(),
        state: RunState::Running,
        goal: Some("Add a config loader".into()),
        tasks: 3,
        merged: 1,
        cost_usd: 0.0,
        created_at: None,
        error: None,
    }
}

fn three_tasks() -> SwarmView {
    let status = status(vec![
        task("parse", TaskState::Merged, None),
        task("loader", TaskState::Implementing, Some("0199aaaa-0000-7000-8000-111111111111")),
        task("cli", TaskState::NeedsInput, Some("0199aaaa-0000-7000-8000-222222222222")),
        task("docs", TaskState::Waiting, None),
    ]);
    let runs = vec![summary(&status.run), summary("0199aaaa-older")];
    SwarmView::showing(runs, status)
}

fn render(view: &SwarmView, width: u16, height: u16) -> Buffer {
    let area = Rect::new(0, 0, width, height);
    let mut buffer = Buffer::empty(area);
    draw(view, area, &mut buffer);
    buffer
}

fn text(buffer: &Buffer) -> String {
    let mut text = String::new();
    for y in 0..buffer.area.height {
        let line: String =
            (0..buffer.area.width).map(|x| buffer[(x, y)].symbol().to_owned()).collect();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

#[test]
fn the_table_has_the_status_columns_and_tasks_needing_input_come_first_marked() {
    let view = three_tasks();
    assert_eq!(height(&view), 10);
    let screen = text(&render(&view, 100, 10));
    let expected = "\
╭ Swarm · run 0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000 (1 of 2) ───────────────────────────────────────╮
│running · kestrel/0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000 · $0.0369 · Add a config loader            │
│! cli needs input: enter opens its session to answer                                              │
│    TASK    STATE         ATTEMPT  SESSION       MODEL               TOKENS IN/OUT     COST   TIME│
│› ! cli     needs-input         1  222222222222  openai/gpt-5.1-co…      12.3k/678  $0.0123  2m05s│
│    parse   merged              1  -             openai/gpt-5.1-co…      12.3k/678  $0.0123  2m05s│
│    loader  implementing        1  111111111111  openai/gpt-5.1-co…      12.3k/678  $0.0123  2m05s│
│    docs    waiting             0  -             -                             0/0  $0.0000     0s│
│↑↓ select · enter open its session · ←→ other runs · esc close                                    │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
";
    assert_eq!(screen, expected);
}

#[test]
fn needs_input_is_marked_in_warning_bold_and_states_have_their_colours() {
    let view = three_tasks();
    let buffer = render(&view, 100, 10);
    let cell = |x: u16, y: u16| buffer[(x, y)].style();
    // The `!` mark and the state of the `cli` row (row 4).
    assert_eq!(buffer[(3, 4)].symbol(), "!");
    assert_eq!(cell(3, 4).fg, Some(Color::Yellow));
    assert!(cell(3, 4).add_modifier.contains(Modifier::BOLD));
    assert_eq!(cell(13, 4).fg, Some(Color::Yellow));
    assert_eq!(cell(13, 5).fg, Some(Color::Green), "merged");
    assert_eq!(cell(13, 6).fg, Some(Color::Cyan), "implementing");
    // Only the needs-input row carries the mark.
    for y in 5..8 {
        assert_eq!(buffer[(3, y)].symbol(), " ", "row {y}");
    }
}

#[test]
fn a_narrow_terminal_cuts_the_model_then_leaves_out_the_session_model_and_tokens() {
    let view = three_tasks();
    let screen = text(&render(&view, 80, 10));
    assert!(screen.contains("TASK    STATE         ATTEMPT  MODEL "), "{screen}");
    assert!(screen.contains("openai/gpt-…  "), "the model is cut to fit: {screen}");
    assert!(!screen.contains("SESSION"), "{screen}");
    let screen = text(&render(&view, 60, 10));
    assert!(screen.contains("TASK    STATE         ATTEMPT     COST   TIME"), "{screen}");
    assert!(!screen.contains("MODEL") && !screen.contains("TOKENS"), "{screen}");
    assert!(screen.contains("needs-input") && screen.contains("2m05s"), "{screen}");
}

#[test]
fn the_selection_moves_by_task_and_scrolls_into_view() {
    let mut view = three_tasks();
    let down = crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Down);
    for _ in 0..3 {
        view.handle_key(down);
    }
    // Two task rows fit: the selected last one is shown.
    let screen = text(&render(&view, 100, 8));
    assert!(screen.contains("›   docs"), "{screen}");
    assert!(!screen.contains("parse"), "{screen}");
}

#[test]
fn no_runs_and_no_tasks_say_so() {
    let mut view = three_tasks();
    view.status = None;
    view.runs = Some(Vec::new());
    view.run = None;
    assert!(text(&render(&view, 100, 4)).contains(NO_RUNS));
    let mut view = three_tasks();
    if let Some(status) = &mut view.status {
        status.tasks.clear();
    }
    assert!(text(&render(&view, 100, 6)).contains("no tasks yet"));
}

#[test]
fn elapsed_time_reads_like_a_clock() {
    assert_eq!(elapsed(0), "0s");
    assert_eq!(elapsed(59), "59s");
    assert_eq!(elapsed(60), "1m00s");
    assert_eq!(elapsed(3599), "59m59s");
    assert_eq!(elapsed(7380), "2h03m");
}
