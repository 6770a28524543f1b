//! Cross-crate integration tests for heisenbench live in `tests/`; this library is empty.
