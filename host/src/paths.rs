//! paths (todo)
