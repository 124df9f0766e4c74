//! The operator's console (`toolhost-console`) mounted at `/console` when
//! `serve --http --console`: what the console borrows from this server —
//! the login check of a token (the server's own verifier, the `console`
//! right, liveness against the ledger) and the current catalog.

use std::sync::Arc;

use toolhost::Right;
use toolhost_console::{Login, Serving};

use super::{SessionPolicy, State};

/// The server, as the console sees it.
pub(crate) struct ConsoleServing {
    pub policy: Arc<dyn SessionPolicy>,
    pub state: Arc<State>,
}

impl Serving for ConsoleServing {
    fn login(&self, token: &str) -> Result<Login, String> {
        let scope = self.policy.scope_for(Some(token)).map_err(|e| e.0)?;
        if scope.anonymous || !scope.session.grant().rights().contains(Right::Console) {
            return Err("the token does not hold the console right".into());
        }
        let session = scope.session.clone();
        let state = self.state.clone();
        let live = move || session.liveness(state.current().host.budgets()).is_ok();
        if !live() {
            return Err("the token is revoked or expired".into());
        }
        let id = scope
            .session
            .chain_ids()
            .last()
            .map(ToString::to_string)
            .unwrap_or_default();
        Ok(Login {
            who: format!("console:{id}"),
            live: Box::new(live),
        })
    }

    fn catalog(&self, f: &mut dyn FnMut(&toolhost::Catalog)) {
        f(self.state.current().host.catalog());
    }
}
