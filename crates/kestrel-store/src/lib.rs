//! Everything under `$KESTREL_HOME`: paths, config loading, session records
//! (locked append, streaming replay, fork) and the session index.
