//! Who may do what: tokens (read from environment variables, compared in
//! constant time) and the scopes they grant.
use subtle::ConstantTimeEq;

/// May stop motion, whoever drives, and start none: every scope has it
/// (the `stop` tool). A halt is never a risk to refuse a watcher; what it
/// costs others is bounded by the tool's rate limit, and each stop names
/// its session in a `governor` event.
pub(crate) const CAN_HALT: &str = "can_halt";

/// What a token allows. Scopes are ordered: each includes the ones before.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize, serde::Serialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Sensors, and halting all motion (`stop`): the safe direction is
    /// open to anyone watching, as an emergency-stop button is.
    Observe,
    /// Sensors and actuators (motion needs the lease as well).
    Actuate,
    /// Everything, including operator tools.
    Admin,
}

impl Scope {
    /// The capabilities this scope grants: AICC's reserved ones (section
    /// 7) and the bridge's own, [`CAN_HALT`] and `can_administer_bridge`.
    pub fn capabilities(self) -> &'static [&'static str] {
        match self {
            Scope::Observe => &["can_observe_world", CAN_HALT],
            Scope::Actuate => &["can_observe_world", CAN_HALT, "can_move_self", "can_communicate"],
            Scope::Admin => &[
                "can_observe_world",
                CAN_HALT,
                "can_move_self",
                "can_communicate",
                "can_administer_bridge",
                "can_modify_world",
            ],
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Observe => "observe",
            Scope::Actuate => "actuate",
            Scope::Admin => "admin",
        }
    }
}

/// Why a token cannot be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// An empty token would let anyone in.
    #[error("an empty token is not allowed")]
    Empty,
}

/// Who a connection proved to be, for the rules that tell callers apart
/// (who may decide an approval, who may resume a session, whose AI-control
/// commands a replacing command may cancel). Never the token's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Credential {
    /// No tokens are configured: any loopback peer, with
    /// `security.unauthenticated_scope`. All such peers are one credential.
    Unauthenticated,
    /// The configured token with this number (its place among the
    /// configured tokens): peers presenting the same token are one.
    Token(usize),
    /// A front end inside the bridge process (the console, the AI-control
    /// dialect's session), by name: no listener leads to it.
    InProcess(&'static str),
}

impl Credential {
    /// How the credential is shown in audits and errors (never a secret).
    pub fn describe(&self) -> String {
        match self {
            Credential::Unauthenticated => "no token (tokens are not configured)".into(),
            Credential::Token(n) => format!("token #{n}"),
            Credential::InProcess(name) => format!("the bridge's own {name}"),
        }
    }
}

/// The configured tokens. Debug never prints a secret.
#[derive(Clone, Default)]
pub struct Tokens {
    entries: Vec<(Vec<u8>, Scope)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scopes: Vec<&str> = self.entries.iter().map(|(_, s)| s.as_str()).collect();
        write!(f, "Tokens({} configured: {scopes:?})", self.entries.len())
    }
}

impl Tokens {
    /// Adds a token; empty tokens are refused (an empty token would let
    /// anyone in).
    pub fn add(&mut self, token: &str, scope: Scope) -> Result<(), TokenError> {
        if token.is_empty() {
            return Err(TokenError::Empty);
        }
        self.entries.push((token.as_bytes().to_vec(), scope));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether some token grants `scope` (or more).
    pub fn grants(&self, scope: Scope) -> bool {
        self.entries.iter().any(|(_, granted)| *granted >= scope)
    }

    /// The scope of `presented`, if it matches a token. Every configured
    /// token is compared in full, in constant time, whatever matches.
    pub fn check(&self, presented: &str) -> Option<Scope> {
        self.identify(presented).map(|(scope, _)| scope)
    }

    /// The scope and the credential of `presented`, if it matches a token
    /// (the widest scope when one text was configured twice). Every
    /// configured token is compared in full, in constant time.
    pub fn identify(&self, presented: &str) -> Option<(Scope, Credential)> {
        let presented = presented.as_bytes();
        let mut granted: Option<(Scope, Credential)> = None;
        for (index, (secret, scope)) in self.entries.iter().enumerate() {
            let equal: bool =
                secret.len() == presented.len() && bool::from(secret.as_slice().ct_eq(presented));
            if equal && granted.is_none_or(|(best, _)| *scope > best) {
                granted = Some((*scope, Credential::Token(index)));
            }
        }
        granted
    }

    /// Two configured tokens with the same text but different scopes (by
    /// their places), if any: such a token would make its holder both,
    /// e.g. the agent an operator.
    pub fn shared_across_scopes(&self) -> Option<(usize, usize)> {
        for (i, (a, scope_a)) in self.entries.iter().enumerate() {
            for (j, (b, scope_b)) in self.entries.iter().enumerate().skip(i + 1) {
                if scope_a != scope_b && bool::from(a.as_slice().ct_eq(b.as_slice())) {
                    return Some((i, j));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_grant_their_scope_and_nothing_else() {
        let mut tokens = Tokens::default();
        tokens.add("watch-only", Scope::Observe).unwrap();
        tokens.add("drive", Scope::Actuate).unwrap();
        assert_eq!(tokens.check("watch-only"), Some(Scope::Observe));
        assert_eq!(tokens.check("drive"), Some(Scope::Actuate));
        assert_eq!(tokens.check("driv"), None);
        assert_eq!(tokens.check(""), None);
        assert!(tokens.add("", Scope::Admin).is_err());
        assert_eq!(tokens.add("", Scope::Admin), Err(TokenError::Empty));
        assert!(!format!("{tokens:?}").contains("drive"), "Debug must not print secrets");
        assert_eq!(
            Scope::Observe.capabilities(),
            ["can_observe_world", CAN_HALT],
            "an observer observes and may halt, nothing more"
        );
        for scope in [Scope::Observe, Scope::Actuate, Scope::Admin] {
            assert!(scope.capabilities().contains(&CAN_HALT), "{scope:?} may halt");
        }
    }

    #[test]
    fn a_token_identifies_its_holder_and_one_text_in_two_scopes_is_found() {
        let mut tokens = Tokens::default();
        tokens.add("operator-secret", Scope::Admin).unwrap();
        tokens.add("agent-secret", Scope::Actuate).unwrap();
        assert_eq!(tokens.identify("agent-secret"), Some((Scope::Actuate, Credential::Token(1))));
        assert_eq!(tokens.identify("operator-secret"), Some((Scope::Admin, Credential::Token(0))));
        assert_eq!(tokens.shared_across_scopes(), None);
        tokens.add("agent-secret", Scope::Actuate).unwrap();
        assert_eq!(
            tokens.shared_across_scopes(),
            None,
            "the same text twice in one scope grants nothing more"
        );
        tokens.add("agent-secret", Scope::Admin).unwrap();
        assert_eq!(tokens.shared_across_scopes(), Some((1, 3)));
        assert_eq!(
            tokens.identify("agent-secret"),
            Some((Scope::Admin, Credential::Token(3))),
            "the widest scope"
        );
        assert!(!Credential::Token(1).describe().contains("secret"));
    }
}
