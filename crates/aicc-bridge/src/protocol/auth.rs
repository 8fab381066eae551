//! Who may do what: tokens (read from environment variables, compared in
//! constant time) and the scopes they grant.
use subtle::ConstantTimeEq;

/// May stop motion, whoever drives, and start none: every scope has it
/// (the `stop` tool). A halt is never a risk to refuse a watcher; what it
/// costs others is bounded by the tool's rate limit, and each stop names
/// its session in a `governor` event.
pub const CAN_HALT: &str = "can_halt";

/// What a token allows. Scopes are ordered: each includes the ones before.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Deserialize, serde::Serialize)]
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
            Scope::Admin => &["can_observe_world", CAN_HALT, "can_move_self", "can_communicate", "can_administer_bridge", "can_modify_world"],
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
        let presented = presented.as_bytes();
        let mut granted = None;
        for (secret, scope) in &self.entries {
            let equal: bool = secret.len() == presented.len() && bool::from(secret.as_slice().ct_eq(presented));
            if equal {
                granted = granted.max(Some(*scope));
            }
        }
        granted
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
        assert_eq!(Scope::Observe.capabilities(), ["can_observe_world", CAN_HALT], "an observer observes and may halt, nothing more");
        for scope in [Scope::Observe, Scope::Actuate, Scope::Admin] {
            assert!(scope.capabilities().contains(&CAN_HALT), "{scope:?} may halt");
        }
    }
}
