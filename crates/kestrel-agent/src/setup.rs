//! From config and flags to a running `Session`: which provider and key, which model,
//! the system prompt, and the record (new, or resumed with its history replayed).

use crate::AgentError;
use crate::approval::Approver;
use crate::control::ModelChoice;
use crate::history::History;
use crate::instructions::find_instructions;
use crate::provider_context;
use crate::session::{Session, SessionSettings};
use crate::swarm_role::{add_role_tools, role_note};
use kestrel_model::{ClientOptions, ModelClient, ProviderConfig, ReasoningEffort, WireApi};
use kestrel_protocol::{
    Mode, Notice, NoticeKind, RECORD_VERSION, RecordEntry, RecordHeader, RecordItem, SessionId,
    StopReason, Timestamp, WorkspaceRepository, swarm::SwarmSessionTag,
};
use kestrel_store::{Config, KestrelHome, SessionRecord, WireApiSetting, split_model_ref};
use kestrel_tools::mcp::McpServers;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const BASE_PROMPT: &str = include_str!("system_prompt.md");

/// Added to a subagent's system prompt: only its last message goes back.
const SUBAGENT_NOTE: &str = "\nYou are a subagent: another agent gave you one task. Work on \
it on your own (no one can answer questions) and end with a final message that is complete \
by itself: it is the only thing returned to the agent that started you.\n";

/// Everything a host decided before a session opens.
#[derive(Clone)]
pub struct Launch {
    pub home: KestrelHome,
    pub config: Config,
    pub cwd: PathBuf,
    /// `provider/model`, already chosen by flag, environment or config; `None` on resume
    /// means "the model the record names".
    pub model: Option<String>,
    pub mode: Mode,
    pub reasoning: Option<ReasoningEffort>,
    pub max_turns: Option<u32>,
    pub client_options: ClientOptions,
}

/// The provider to call for `provider/model`, its key read from the environment.
pub struct ResolvedModel {
    pub provider: ProviderConfig,
    /// The model id sent to the provider.
    pub model_id: String,
    /// The client options with the provider's own retry and timeout settings applied.
    pub client_options: ClientOptions,
}

/// Finds the provider of `provider/model` and reads its key. Fails before any request
/// when the provider is unknown or its key variable is unset or empty.
pub fn resolve_model(
    config: &Config,
    home: &KestrelHome,
    model_ref: &str,
    options: &ClientOptions,
) -> Result<ResolvedModel, AgentError> {
    let (provider_name, model_id) = split_model_ref(model_ref)?;
    let config_path = home.config_file().display().to_string();
    let Some(settings) = config.provider(&provider_name) else {
        return Err(AgentError::UnknownProvider {
            provider: provider_name,
            model: model_ref.to_string(),
            known: config.provider_names().join(", "),
            config: config_path,
        });
    };
    let api_key = match &settings.api_key_env {
        Some(variable) => match std::env::var(variable) {
            Ok(value) if !value.trim().is_empty() => Some(value),
            Ok(_) | Err(_) => {
                return Err(AgentError::MissingApiKey {
                    provider: provider_name,
                    variable: variable.clone(),
                });
            }
        },
        None => None,
    };
    let wire_api = match settings.wire_api {
        WireApiSetting::Chat => WireApi::Chat,
        WireApiSetting::Responses => WireApi::Responses,
        WireApiSetting::Anthropic => WireApi::Anthropic,
    };
    let provider = ProviderConfig {
        name: provider_name,
        base_url: settings.base_url.clone(),
        wire_api,
        api_key,
        api_key_env: settings.api_key_env.clone(),
        headers: settings.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    };
    let mut client_options = options.clone();
    if let Some(retries) = settings.request_max_retries {
        client_options.retry.max_attempts = retries.saturating_add(1);
    }
    if let Some(millis) = settings.stream_idle_timeout_ms {
        client_options.idle_timeout = std::time::Duration::from_millis(millis);
    }
    Ok(ResolvedModel { provider, model_id, client_options })
}

/// The system prompt: Kestrel's own, then the project instructions that apply in `cwd`.
pub fn system_prompt(home: &KestrelHome, cwd: &Path) -> String {
    let mut prompt = BASE_PROMPT.to_string();
    prompt.push_str(&format!("\nWorking directory: {}\n", cwd.display()));
    for file in find_instructions(&home.agents_md(), cwd) {
        prompt.push_str(&format!(
            "\n# Instructions from {}\n\n{}\n",
            file.path.display(),
            file.text.trim_end()
        ));
    }
    prompt
}

/// Opens a new session, or resumes `resume` with its history replayed. A turn the
/// record shows unfinished is recorded as interrupted (and never re-sent by itself).
pub fn open_session(
    launch: &Launch,
    resume: Option<&SessionId>,
    approver: Arc<dyn Approver>,
) -> Result<Session, AgentError> {
    match resume {
        None => new_session(launch, None, None, approver),
        Some(id) => resume_session(launch, id, approver).map(|(session, _)| session),
    }
}

/// Opens a new session as a subagent of `parent`: its record's header names the parent,
/// its system prompt says it is a subagent, and, with no model chosen, it runs on the
/// parent's recorded model. Fails like [`open_session`], and when no model is chosen
/// and the parent cannot be found.
pub fn open_child_session(
    launch: &Launch,
    parent: &SessionId,
    approver: Arc<dyn Approver>,
) -> Result<Session, AgentError> {
    if launch.model.is_some() {
        return new_session(launch, Some(parent.clone()), None, approver);
    }
    let summary = kestrel_store::SessionIndex::find(&launch.home, parent.as_str())?;
    let launch =
        Launch { model: Some(format!("{}/{}", summary.provider, summary.model)), ..launch.clone() };
    new_session(&launch, Some(parent.clone()), None, approver)
}

/// Opens a new session playing a swarm role (ARCHITECTURE §10): its record header
/// carries `tag`, its system prompt names the role and it is offered the role's tools
/// (also when it is resumed). It is not a subagent and starts none. `launch.mode` is
/// used as given: hosts pick the role's default (`SwarmRole::default_mode`) when nothing
/// else was chosen. Fails like [`open_session`].
pub fn open_swarm_session(
    launch: &Launch,
    tag: SwarmSessionTag,
    approver: Arc<dyn Approver>,
) -> Result<Session, AgentError> {
    new_session(launch, None, Some(tag), approver)
}

/// Resumes session `id`: takes its record's lock, replays its history and records an
/// unfinished turn as interrupted. Also returns every item of the record, the ones
/// written to close an unfinished turn included, for hosts that show the history.
///
/// The model is `launch.model` when set, else the last one the record switched to,
/// else the record header's. The mode is the last one the record switched to, else the
/// default of the swarm role the header names, else `launch.mode`. Fails when the record
/// cannot be found, read or locked (another process has it open), or the model cannot be
/// resolved.
pub fn resume_session(
    launch: &Launch,
    id: &SessionId,
    approver: Arc<dyn Approver>,
) -> Result<(Session, Vec<RecordEntry>), AgentError> {
    let (mut record, replay) = SessionRecord::open(&launch.home, id)?;
    let mut history = History::replay(&replay.entries);
    let mut entries = replay.entries;
    entries.extend(close_unfinished_turn(&mut record, &mut history, &entries)?);
    let recorded_model = entries
        .iter()
        .rev()
        .find_map(|entry| {
            let RecordItem::Notice { notice } = &entry.item else { return None };
            (notice.kind == NoticeKind::ModelSwitch).then(|| notice.model.clone()).flatten()
        })
        .unwrap_or_else(|| format!("{}/{}", replay.header.provider, replay.header.model));
    let model_ref = launch.model.clone().unwrap_or(recorded_model);
    // A mode switched to in the session outlives a restart or resume.
    let recorded_mode = entries.iter().rev().find_map(|entry| {
        let RecordItem::Notice { notice } = &entry.item else { return None };
        (notice.kind == NoticeKind::ModeSwitch).then_some(notice.mode).flatten()
    });
    // A restarted reviewer is still read-only: the role's mode holds unless switched.
    let role_mode = replay.header.swarm.as_ref().map(|tag| tag.role.default_mode());
    let mode = recorded_mode.or(role_mode).unwrap_or(launch.mode);
    let launch = &Launch { mode, ..launch.clone() };
    let mut session = start(launch, record, history, &model_ref, approver)?;
    // The context as the last request left it (its input and the output that followed),
    // so a session resumed nearly full compacts before its first request.
    let newest_compaction =
        entries.iter().rposition(|e| matches!(e.item, RecordItem::Compaction { .. }));
    let last_usage =
        entries[newest_compaction.map_or(0, |index| index + 1)..].iter().rev().find_map(|entry| {
            let RecordItem::Usage { usage } = &entry.item else { return None };
            Some(*usage)
        });
    if let Some(usage) = last_usage {
        session.resumed_with(usage.input_tokens.saturating_add(usage.output_tokens));
    }
    Ok((session, entries))
}

/// Resolves `model_ref` (provider, key), builds its client and looks up its limits and
/// prices in the catalog: the cached one or the bundled snapshot, never the network (a
/// stale cache is refreshed in the background, not waited for). Also for a model switch.
pub fn choose_model(
    config: &Config,
    home: &KestrelHome,
    model_ref: &str,
    options: &ClientOptions,
) -> Result<ModelChoice, AgentError> {
    let resolved = resolve_model(config, home, model_ref, options)?;
    let catalog_settings = kestrel_model::CatalogSettings::from_config(config);
    let catalog = kestrel_model::CatalogStore::new(home, catalog_settings.clone());
    let mut profile = catalog.session_profile(&resolved.provider, &resolved.model_id);
    // `[providers.NAME] context_window`: what the server really runs with wins.
    let settings = config.provider(&resolved.provider.name);
    if let Some(tokens) = settings.as_ref().and_then(|p| p.context_window) {
        profile.context_window = tokens;
    } else if profile.origin == kestrel_model::ProfileOrigin::Unknown {
        // Else, for a model the catalog does not know, what the provider's own list
        // reports (cached; fetched in the background, never waited for).
        let provider = &resolved.provider;
        if let Some(tokens) = provider_context::reported_context(home, provider, &resolved.model_id)
        {
            profile.context_window = tokens;
        }
        // `catalog_url = "off"` means no fetching of model metadata at all.
        if catalog_settings.url.is_some() {
            let ca_bundle = catalog_settings.ca_bundle.clone();
            provider_context::refresh_in_background(
                home,
                provider,
                ca_bundle,
                catalog_settings.ttl,
            );
        }
    }
    // `[providers.NAME] images`: a local vision model the catalog does not know.
    if let Some(images) = settings.as_ref().and_then(|p| p.images) {
        profile.accepts_images = images;
    }
    let client = ModelClient::new(resolved.provider, resolved.client_options)?;
    Ok(ModelChoice {
        model_ref: model_ref.to_string(),
        model_id: resolved.model_id,
        client,
        profile,
    })
}

fn new_session(
    launch: &Launch,
    parent_id: Option<SessionId>,
    swarm: Option<SwarmSessionTag>,
    approver: Arc<dyn Approver>,
) -> Result<Session, AgentError> {
    let model_ref = launch.model.clone().ok_or_else(|| AgentError::NoModel {
        config: launch.home.config_file().display().to_string(),
    })?;
    let (provider_name, model_id) = split_model_ref(&model_ref)?;
    // Check the provider and key before anything is written.
    resolve_model(&launch.config, &launch.home, &model_ref, &launch.client_options)?;
    // A subagent trusts the repository its parent does, never one made since.
    let repository = match &parent_id {
        Some(parent) => kestrel_store::read_header(&launch.home, parent)
            .ok()
            .and_then(|header| header.repository)
            .unwrap_or(WorkspaceRepository::None),
        None => kestrel_tools::permission::workspace_repository(&launch.cwd, &launch.home),
    };
    let header = RecordHeader {
        id: SessionId::new(),
        version: RECORD_VERSION,
        created_at: Timestamp::now(),
        cwd: launch.cwd.display().to_string(),
        provider: provider_name,
        model: model_id,
        parent_id,
        forked_from: None,
        swarm,
        repository: Some(repository),
    };
    let record = SessionRecord::create(&launch.home, header)?;
    start(launch, record, History::default(), &model_ref, approver)
}

fn start(
    launch: &Launch,
    record: SessionRecord,
    history: History,
    model_ref: &str,
    approver: Arc<dyn Approver>,
) -> Result<Session, AgentError> {
    let choice = choose_model(&launch.config, &launch.home, model_ref, &launch.client_options)?;
    let mut system_prompt = system_prompt(&launch.home, &launch.cwd);
    if record.header().parent_id.is_some() {
        system_prompt.push_str(SUBAGENT_NOTE);
    }
    let swarm = record.header().swarm.clone();
    if let Some(tag) = &swarm {
        system_prompt.push_str(&role_note(tag));
    }
    let settings = SessionSettings {
        cwd: launch.cwd.clone(),
        workspace: launch.cwd.clone(),
        mode: launch.mode,
        network: launch.config.sandbox.network,
        model: choice.model_id,
        reasoning: launch.reasoning,
        profile: choice.profile,
        max_turns: launch.max_turns,
        system_prompt,
        home: launch.home.clone(),
        permissions: launch.config.permissions.clone(),
        compact_at: launch.config.agent.compact_at,
        max_subagents: usize::try_from(launch.config.agent.max_subagents).unwrap_or(usize::MAX),
    };
    let mut tools = kestrel_tools::builtin_tools();
    if let Some(tag) = &swarm {
        add_role_tools(&mut tools, tag);
    }
    // Started in the background: an interactive first turn never waits for an MCP
    // server (a headless one does: exec.rs).
    if !launch.config.mcp_servers.is_empty() {
        let servers = McpServers::start(&launch.config.mcp_servers, &launch.cwd);
        tools.add_source(Arc::new(servers));
    }
    Ok(Session::new(record, history, choice.client, tools, settings, approver))
}

/// Records a turn that has a start but no end as interrupted, answering its tool calls
/// so the conversation stays valid for every API.
fn close_unfinished_turn(
    record: &mut SessionRecord,
    history: &mut History,
    entries: &[RecordEntry],
) -> Result<Vec<RecordEntry>, AgentError> {
    let last_marker =
        entries.iter().rev().map(|entry| &entry.item).find(|item| {
            matches!(item, RecordItem::TurnStarted {} | RecordItem::TurnCompleted { .. })
        });
    let unfinished = matches!(last_marker, Some(RecordItem::TurnStarted {}));
    // A record written before every ended turn answered its calls is repaired too.
    let mut items: Vec<RecordItem> = history
        .unanswered_calls()
        .into_iter()
        .map(|call| RecordItem::ToolResult {
            id: call.id,
            output: "this tool call was interrupted before it finished".to_string(),
            is_error: true,
            duration_ms: 0,
        })
        .collect();
    if unfinished {
        items.push(RecordItem::Notice {
            notice: Notice {
                kind: NoticeKind::Error,
                message: "the previous turn was interrupted; it was not re-sent".to_string(),
                model: None,
                mode: None,
            },
        });
        items.push(RecordItem::TurnCompleted { stop_reason: StopReason::Interrupted, error: None });
    }
    let mut written = Vec::new();
    for item in items {
        history.apply(&item);
        let entry = RecordEntry::now(item);
        record.append(&entry).map_err(AgentError::Record)?;
        written.push(entry);
    }
    Ok(written)
}
