//! json (todo)
