//! What a host may change while a turn runs: the mode, read before each batch of tool
//! calls, and the model, taken at the next model request. The session and its host share
//! one [`SessionControl`]; the session records a model switch when it takes it.

use kestrel_model::ModelClient;
use kestrel_protocol::Mode;
use std::sync::{Arc, Mutex, MutexGuard};

/// A model to switch to, already resolved (provider found, key read, client built).
pub struct ModelChoice {
    /// As the user named it: `provider/model`.
    pub model_ref: String,
    /// The id sent to the provider.
    pub model_id: String,
    pub client: ModelClient,
    /// Its limits and prices, from the catalog.
    pub profile: kestrel_model::ModelProfile,
}

/// A handle on a session's mode and pending model switch. Cheap to clone.
#[derive(Clone)]
pub struct SessionControl {
    state: Arc<Mutex<State>>,
}

struct State {
    mode: Mode,
    model: Option<ModelChoice>,
}

impl SessionControl {
    pub(crate) fn new(mode: Mode) -> Self {
        Self { state: Arc::new(Mutex::new(State { mode, model: None })) }
    }

    /// The mode the next tool calls run in.
    pub fn mode(&self) -> Mode {
        self.state().mode
    }

    /// Switches the mode; a running turn applies it from its next tool call on.
    pub fn set_mode(&self, mode: Mode) {
        self.state().mode = mode;
    }

    /// Switches the model from the session's next model request on (or at the end of the
    /// running turn, whichever comes first), replacing a switch not yet taken.
    pub fn switch_model(&self, choice: ModelChoice) {
        self.state().model = Some(choice);
    }

    pub(crate) fn take_model(&self) -> Option<ModelChoice> {
        self.state().model.take()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state stays valid even if a holder panicked: every write is one assignment.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
