//! catalog (todo)
