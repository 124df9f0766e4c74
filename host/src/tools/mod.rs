//! The host's own tools, dispatched by [`Host::run`](crate::Host::run)
//! like plugin tools, and the state they keep.
//!
//! - [`artifact`]: results too large to return, kept for the token that
//!   made them, and `artifact_view`;
//! - [`discovery`]: `find_tools`, a BM25 index of the catalog;
//! - [`lexicon`]: related words from WordNet, widening a search;
//! - [`reveal`]: the tools `find_tools` revealed to a token or session;
//! - [`host_tool`]: [`HostTool`](host_tool::HostTool), each of them (and
//!   `delegate`) by name, with its published definition.
//!
//! `run_script`'s side is [`crate::script`], above the side effects: its
//! inner calls run through the batch scheduler.

pub mod artifact;
pub mod discovery;
pub mod host_tool;
pub mod lexicon;
pub mod reveal;

#[cfg(test)]
mod task_words_tests;
