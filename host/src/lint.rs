//! lint (todo)
