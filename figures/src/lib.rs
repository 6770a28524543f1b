//! heisenbench-figures: the paper's figures, drawn from report files.
//!
//! Not built yet: this crate reserves its place in the workspace.
