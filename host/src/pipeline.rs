//! pipeline (todo)
