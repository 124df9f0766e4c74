//! sandbox (todo)
