//! Who may use the console: an admin token exchanged once for a session
//! cookie, and a brake on guessing. No I/O: the handlers pass `now`.
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The cookie that carries a console session.
pub const COOKIE: &str = "aicc_console";
/// A console session lasts this long after it was opened.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Console sessions kept at once (the oldest is ended to open another).
pub const MAX_SESSIONS: usize = 64;
/// Refused logins within [`FAILURE_WINDOW`] before every login is refused
/// until the window has passed.
pub const MAX_FAILURES: usize = 10;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// What a login attempt led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Login {
    /// The session id to set as the cookie.
    Granted(String),
    /// The token is not an admin token.
    Refused,
    /// Too many refusals lately: not even checked; retry after this.
    Throttled { retry_after: Duration },
}

#[derive(Debug, Default)]
pub struct Logins {
    /// Session id → when it ends.
    sessions: HashMap<String, Instant>,
    /// Refused attempts in the window, oldest first.
    failures: VecDeque<Instant>,
}

impl Logins {
    /// Decides an attempt. `is_admin` says whether the presented token is
    /// an admin token (checked by the caller, in constant time);
    /// `new_session_id` is the random id to hand out if granted.
    pub fn attempt(&mut self, is_admin: bool, new_session_id: String, now: Instant) -> Login {
        self.failures.retain(|at| now.saturating_duration_since(*at) < FAILURE_WINDOW);
        if self.failures.len() >= MAX_FAILURES {
            let oldest = self.failures.front().copied().unwrap_or(now);
            return Login::Throttled { retry_after: FAILURE_WINDOW.saturating_sub(now.saturating_duration_since(oldest)) };
        }
        if !is_admin {
            self.failures.push_back(now);
            return Login::Refused;
        }
        self.sessions.retain(|_, ends| *ends > now);
        if self.sessions.len() >= MAX_SESSIONS {
            if let Some(oldest) = self.sessions.iter().min_by_key(|(_, ends)| **ends).map(|(id, _)| id.clone()) {
                self.sessions.remove(&oldest);
            }
        }
        self.sessions.insert(new_session_id.clone(), now + SESSION_LIFETIME);
        Login::Granted(new_session_id)
    }

    /// Whether a request's `Cookie` header carries a live console session.
    pub fn admits(&self, cookie_header: Option<&str>, now: Instant) -> bool {
        let Some(id) = cookie_header.and_then(session_cookie) else { return false };
        self.sessions.iter().any(|(known, ends)| *ends > now && bool::from(subtle::ConstantTimeEq::ct_eq(known.as_bytes(), id.as_bytes())))
    }

    /// Ends the session of a `Cookie` header (logging out).
    pub fn end(&mut self, cookie_header: Option<&str>) {
        if let Some(id) = cookie_header.and_then(session_cookie) {
            self.sessions.remove(id);
        }
    }
}

/// The console session id in a `Cookie` header's `name=value; ...` pairs.
pub fn session_cookie(header: &str) -> Option<&str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(name, _)| *name == COOKIE).map(|(_, value)| value).filter(|v| !v.is_empty())
}

/// The `token` field of an `application/x-www-form-urlencoded` body.
pub fn form_token(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').filter_map(|pair| pair.split_once('=')).find(|(name, _)| *name == "token").and_then(|(_, value)| percent_decode(value))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_token_opens_a_session_its_cookie_admits_until_it_ends() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        assert_eq!(logins.attempt(true, "abc".into(), t0), Login::Granted("abc".into()));
        assert!(logins.admits(Some("theme=dark; aicc_console=abc"), t0));
        assert!(!logins.admits(Some("aicc_console=abd"), t0), "another id");
        assert!(!logins.admits(Some("aicc_console="), t0));
        assert!(!logins.admits(None, t0));
        assert!(!logins.admits(Some("aicc_console=abc"), t0 + SESSION_LIFETIME), "expired");
        logins.end(Some("aicc_console=abc"));
        assert!(!logins.admits(Some("aicc_console=abc"), t0), "logged out");
    }

    #[test]
    fn repeated_refusals_throttle_every_login_for_the_window() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        for n in 0..MAX_FAILURES {
            assert_eq!(logins.attempt(false, format!("s{n}"), t0), Login::Refused);
        }
        // Even the right token is not checked now: guessing gains nothing.
        assert!(matches!(logins.attempt(true, "s".into(), t0 + Duration::from_secs(10)), Login::Throttled { retry_after } if retry_after == Duration::from_secs(50)));
        assert_eq!(logins.attempt(true, "s".into(), t0 + FAILURE_WINDOW), Login::Granted("s".into()));
    }

    #[test]
    fn sessions_are_bounded() {
        let t0 = Instant::now();
        let mut logins = Logins::default();
        for n in 0..MAX_SESSIONS + 5 {
            logins.attempt(true, format!("s{n}"), t0 + Duration::from_millis(n as u64));
        }
        assert_eq!(logins.sessions.len(), MAX_SESSIONS);
        assert!(!logins.admits(Some("aicc_console=s0"), t0), "the oldest was ended");
        assert!(logins.admits(Some(&format!("aicc_console=s{}", MAX_SESSIONS + 4)), t0));
    }

    #[test]
    fn form_bodies_are_decoded() {
        assert_eq!(form_token(b"token=a%2Bb%3D+c&x=1").as_deref(), Some("a+b= c"));
        assert_eq!(form_token(b"x=1"), None);
        assert_eq!(form_token(b"token=%zz"), None, "bad escape");
        assert_eq!(form_token(b"token=%4"), None, "cut escape");
    }
}
