//! observation (todo)
