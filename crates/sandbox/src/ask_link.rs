//! The `toolhost:plugin/client` import, linked for every component: a
//! tool's question to the person behind the client.
//!
//! [`State`]'s `client::Host::ask` counts the call's questions (at most
//! [`MAX_QUESTIONS`]) and hands each to [`toolhost_base::ask::mediate`] with the
//! call's asker; a dry-run, a probe and `describe` have none, so they are
//! told `unavailable`. A question whose answer comes only with a later
//! request stops the guest here: the question is kept in the state, and
//! the run ends [`Failure::InputRequired`](super::Failure::InputRequired).

use wasmtime::component::{HasSelf, Linker};

use super::bindings::plugin::toolhost::plugin::client as wit;
use super::{SandboxError, State};
use toolhost_base::ask::{mediate, Answer, Mediated, MAX_QUESTIONS};

/// The trap message of a call stopped for its question.
pub(super) const INPUT_REQUIRED: &str = "toolhost: the call waits for an answer";

/// SHA-256 (hex) of an answer as the plugin gets it: the form's JSON, or
/// `declined` / `cancelled`.
fn answer_digest(answer: &Answer) -> String {
    use sha2::{Digest, Sha256};
    let text = match answer {
        Answer::Accepted(content) => content.to_string(),
        Answer::Declined => "declined".into(),
        Answer::Cancelled => "cancelled".into(),
    };
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Adds `toolhost:plugin/client` to `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<State>) -> Result<(), SandboxError> {
    wit::add_to_linker::<State, HasSelf<State>>(linker, |s| s)
        .map_err(|e| SandboxError::Engine(format!("{e:#}")))
}

impl wit::Host for State {
    fn ask(&mut self, q: wit::Question) -> wasmtime::Result<Result<wit::Answer, wit::AskError>> {
        self.questions += 1;
        if self.questions > MAX_QUESTIONS {
            return Ok(Err(wit::AskError::Invalid(format!(
                "a call may ask at most {MAX_QUESTIONS} questions"
            ))));
        }
        let asker = self.asker.clone();
        let mediated = mediate(asker.as_deref(), &q.key, &q.message, &q.schema);
        if let Mediated::Answer(answer) = &mediated {
            self.answered.push((q.key.clone(), answer_digest(answer)));
        }
        Ok(match mediated {
            Mediated::Answer(Answer::Accepted(content)) => {
                Ok(wit::Answer::Accepted(content.to_string()))
            }
            Mediated::Answer(Answer::Declined) => Ok(wit::Answer::Declined),
            Mediated::Answer(Answer::Cancelled) => Ok(wit::Answer::Cancelled),
            Mediated::Unavailable(why) => Err(wit::AskError::Unavailable(why)),
            Mediated::Invalid(why) => Err(wit::AskError::Invalid(why)),
            Mediated::Later(question) => {
                self.pending = Some(question);
                return Err(wasmtime::Error::msg(INPUT_REQUIRED));
            }
        })
    }
}
