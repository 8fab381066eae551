//! Per-connection authorization, free of I/O. Tokens are the bridge's own
//! (compared in constant time by [`Tokens::check`]); each connection
//! authenticates on its own and never inherits another's authorization.
use crate::protocol::auth::{Credential, Scope, Tokens};

/// What an `auth` attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthOutcome {
    pub authorized: bool,
    /// Too many failed attempts: answer, then close the connection.
    pub close: bool,
}

/// One connection's authorization.
#[derive(Debug, Clone)]
pub struct Gate {
    scope: Option<Scope>,
    /// Who it authenticated as: whose commands its `act` may replace, and
    /// whose lease its requests keep.
    credential: Option<Credential>,
    failures: u32,
    max_failures: u32,
}

impl Gate {
    /// Without tokens a connection starts authorized with
    /// `unauthenticated_scope` (the listener is then loopback only).
    pub fn new(tokens: &Tokens, unauthenticated_scope: Scope, max_failures: u32) -> Self {
        let open = tokens.is_empty();
        Self {
            scope: open.then_some(unauthenticated_scope),
            credential: open.then_some(Credential::Unauthenticated),
            failures: 0,
            max_failures: max_failures.max(1),
        }
    }

    /// Checks a token. A wrong one leaves the connection unauthorized (a
    /// later attempt may succeed) until `max_failures` attempts have failed.
    pub fn authenticate(
        &mut self,
        tokens: &Tokens,
        unauthenticated_scope: Scope,
        token: &str,
    ) -> AuthOutcome {
        if tokens.is_empty() {
            self.scope = Some(unauthenticated_scope);
            self.credential = Some(Credential::Unauthenticated);
            return AuthOutcome { authorized: true, close: false };
        }
        match tokens.identify(token) {
            Some((scope, credential)) => {
                self.scope = Some(scope);
                self.credential = Some(credential);
                AuthOutcome { authorized: true, close: false }
            }
            None => {
                self.scope = None;
                self.credential = None;
                self.failures += 1;
                AuthOutcome { authorized: false, close: self.failures >= self.max_failures }
            }
        }
    }

    /// The granted scope; None until authorized.
    pub fn scope(&self) -> Option<Scope> {
        self.scope
    }

    /// Who the connection is; None until authorized.
    pub fn credential(&self) -> Option<Credential> {
        self.credential
    }

    /// Whether the connection may send `act` (its scope may move the robot).
    pub fn may_act(&self) -> bool {
        self.scope.is_some_and(|s| s.capabilities().contains(&"can_move_self"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> Tokens {
        let mut tokens = Tokens::default();
        tokens.add("drive-token", Scope::Actuate).unwrap();
        tokens.add("look-token", Scope::Observe).unwrap();
        tokens
    }

    #[test]
    fn without_tokens_connections_start_authorized() {
        let gate = Gate::new(&Tokens::default(), Scope::Actuate, 5);
        assert_eq!(
            (gate.scope(), gate.credential()),
            (Some(Scope::Actuate), Some(Credential::Unauthenticated))
        );
        assert!(gate.may_act());
    }

    #[test]
    fn a_wrong_token_is_not_authorized_and_a_later_right_one_is() {
        let tokens = tokens();
        let mut gate = Gate::new(&tokens, Scope::Admin, 5);
        assert_eq!(gate.scope(), None);
        assert_eq!(
            gate.authenticate(&tokens, Scope::Admin, "guess"),
            AuthOutcome { authorized: false, close: false }
        );
        assert_eq!(gate.scope(), None);
        assert_eq!(
            gate.authenticate(&tokens, Scope::Admin, "drive-token"),
            AuthOutcome { authorized: true, close: false }
        );
        assert!(gate.may_act());
        assert_eq!(gate.credential(), Some(Credential::Token(0)));
        assert!(!gate.authenticate(&tokens, Scope::Admin, "drive-tokenX").authorized);
        assert!(!gate.may_act(), "a failed attempt leaves the connection unauthorized");
        assert_eq!(gate.credential(), None);
    }

    #[test]
    fn an_observe_token_may_not_act() {
        let tokens = tokens();
        let mut gate = Gate::new(&tokens, Scope::Admin, 5);
        assert!(gate.authenticate(&tokens, Scope::Admin, "look-token").authorized);
        assert_eq!(gate.scope(), Some(Scope::Observe));
        assert!(!gate.may_act());
    }

    #[test]
    fn the_connection_closes_after_the_allowed_failures() {
        let tokens = tokens();
        let mut gate = Gate::new(&tokens, Scope::Admin, 3);
        assert!(!gate.authenticate(&tokens, Scope::Admin, "a").close);
        assert!(!gate.authenticate(&tokens, Scope::Admin, "b").close);
        assert_eq!(
            gate.authenticate(&tokens, Scope::Admin, "c"),
            AuthOutcome { authorized: false, close: true }
        );
    }
}
