//! schema (todo)
