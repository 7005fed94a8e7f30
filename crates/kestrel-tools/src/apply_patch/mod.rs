//! The `*** Begin Patch` format (ARCHITECTURE §6): a pure parser, a tolerant line
//! matcher, an in-memory planner that checks every operation before anything is
//! written, and an atomic writer. `kestrel apply-patch` and the `apply_patch` tool
//! are thin shells around [`apply_patch_with`].
//!
//! The format, briefly:
//!
//! ```text
//! *** Begin Patch
//! *** Add File: notes/todo.md
//! +first line of the new file
//! *** Delete File: old.txt
//! *** Update File: src/lib.rs
//! *** Move to: src/core.rs
//! @@ fn main() {
//!      let x = 1;
//! -    println!("{x}");
//! +    println!("x = {x}");
//! *** End of File
//! *** End Patch
//! ```

mod error;
mod matcher;
mod parser;
mod plan;
mod text;
mod tool;
mod update;
mod write;

pub use error::{FileAction, HunkFailure, PatchError};
pub use matcher::{LineMatch, MatchLevel, find_lines};
pub use parser::{FileOperation, Hunk, HunkLine, Patch, parse_patch};
pub use plan::{ChangeKind, ChangedFile, PatchPlan, PatchSummary, apply_patch, apply_patch_with};
pub use tool::ApplyPatchTool;
pub use update::update_text;
