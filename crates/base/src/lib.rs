//! toolhost-base: what the call path (`toolhost`) and the Wasm sandbox
//! (`toolhost-sandbox`) share, so that neither has to reach into the other.
//!
//! Module map (arrows point down):
//!
//! - [`ask`]: a tool's questions to the person: the checked question and
//!   answer, and the signed input state of a stateless call, over
//! - [`exec_call`]: a call's grant turned into a run of a native program in
//!   the bubblewrap sandbox of the `toolhost-exec` crate, over
//! - [`paths`]: workspace paths and grants, and the one read/write
//!   [`Access`](paths::Access); [`provenance`]: where an observation's
//!   content came from; [`redact`]: secret redaction in outputs and
//!   arguments, over
//! - [`observation`]: the one result shape (`error`, `clip`, `render`,
//!   `hygiene`, and `messages`: the host's own words); [`origin`]: network
//!   origins, one grammar, over
//! - [`descriptor`]: the one tool descriptor type, which the sandbox reads,
//!   the catalog and lint work on and the lock file pins;
//!   [`json`]: strict parsing, canonical JSON (RFC 8785) and compact JSON;
//!   [`opendir`]: open directories and lookups beneath them that follow no
//!   symbolic link; [`file_index`]: line offsets of a file, cached by
//!   version; [`boundary`]: where a window of text may end (after a whole
//!   record); [`sealed`]: signed texts a client hands back; [`secret`]:
//!   32-byte secrets kept in private files; [`toolname`]: the grammar of
//!   tool names and namespaces; [`text`]: small helpers for message text.

pub mod ask;
pub mod boundary;
pub mod descriptor;
pub mod exec_call;
pub mod file_index;
pub mod json;
pub mod observation;
pub mod opendir;
pub mod origin;
pub mod paths;
pub mod provenance;
pub mod redact;
pub mod sealed;
pub mod secret;
#[doc(hidden)]
pub mod text;
pub mod toolname;
