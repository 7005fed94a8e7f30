//! A session: the turn loop (model → tools → model), project instructions, the
//! session record as the turn goes, and the exec host that runs it headless.
