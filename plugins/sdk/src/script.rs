//! Calling tools back through the host: the `toolhost:plugin/script` import.
//!
//! Only the host's script runner gets a working link; in any other call
//! [`call_tool`] (and each call of [`call_tools`]) answers a `denied`
//! error. An inner call runs through the host's call path under the
//! caller's token, exactly as a direct call of the same tool would;
//! [`call_tools`] runs several at once, in parallel where they do not
//! conflict.
//!
//! `Ok` carries the tool's output as JSON text; `Err` carries the
//! observation's error as JSON text (`code`, `message` and, when known,
//! `field`, `expected`, `actual`, `retry`).

pub use crate::bindings::toolhost::plugin::script::{call_tool, call_tools};
