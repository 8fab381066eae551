//! The motion lease: one session at a time may move the robot. The first
//! movement call takes it, the holder's activity renews it, and it is
//! released when the holder leaves or lapses when unused, so that a
//! forgotten agent cannot keep the others from moving.
use std::time::{Duration, Instant};

use serde_json::json;

use super::{short_id, Core, Output};

#[derive(Debug, Default)]
pub(super) struct Lease {
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    session: String,
    renewed: Instant,
}

#[derive(Debug, PartialEq, thiserror::Error)]
pub(super) enum LeaseError {
    /// `holder` is shortened: a full session id is a resume credential.
    #[error("the motion lease is held by session {holder}; retry when it is released")]
    HeldByAnother { holder: String },
}

impl Lease {
    pub(super) fn holder(&self) -> Option<&str> {
        self.held.as_ref().map(|h| h.session.as_str())
    }

    /// Whether `session` may move: the lease is free or already its own.
    pub(super) fn check(&self, session: &str) -> Result<(), LeaseError> {
        match self.holder() {
            Some(holder) if holder != session => {
                Err(LeaseError::HeldByAnother { holder: short_id(holder).to_string() })
            }
            _ => Ok(()),
        }
    }

    /// Takes (or renews) the lease for `session`, which passed [`Lease::check`];
    /// true when it was free, so that everyone is told of the new holder.
    pub(super) fn acquire(&mut self, session: &str, now: Instant) -> bool {
        let newly = self.held.is_none();
        self.held = Some(Held { session: session.to_string(), renewed: now });
        newly
    }

    /// The holder was active: its lease runs from `now`.
    pub(super) fn renew(&mut self, session: &str, now: Instant) {
        if let Some(held) = self.held.as_mut().filter(|h| h.session == session) {
            held.renewed = now;
        }
    }

    /// Frees the lease if `session` holds it; true if it did.
    pub(super) fn release(&mut self, session: &str) -> bool {
        let holds = self.holder() == Some(session);
        if holds {
            self.held = None;
        }
        holds
    }

    /// Frees a lease unused for longer than `timeout`, unless its holder is
    /// `busy` (has calls running); returns the holder it was taken from.
    pub(super) fn lapse(
        &mut self,
        now: Instant,
        timeout: Duration,
        busy: impl FnOnce(&str) -> bool,
    ) -> Option<String> {
        let held = self.held.as_ref()?;
        if busy(&held.session) || now.saturating_duration_since(held.renewed) <= timeout {
            return None;
        }
        self.held.take().map(|h| h.session)
    }
}

impl Core {
    /// Tells every session who holds the lease now (and whether it is theirs).
    pub(super) fn broadcast_lease(&mut self, now: Instant, out: &mut Vec<Output>) {
        let holder = self.lease.holder().map(str::to_string);
        let sessions: Vec<String> = self.sessions.keys().cloned().collect();
        for session in sessions {
            let payload = json!({ "holder": holder.as_deref().map(short_id), "yours": holder.as_deref() == Some(session.as_str()) });
            self.push_event(&session, "lease", payload, now, out);
        }
    }

    /// Releases the lease if `session_id` holds it: the robot stops.
    pub(super) fn release_lease_of(
        &mut self,
        session_id: &str,
        now: Instant,
        reason: &str,
        out: &mut Vec<Output>,
    ) {
        if self.lease.release(session_id) {
            self.announce_release(session_id, now, reason, out);
        }
    }

    /// A lease unused for too long lapses (not while its holder is acting).
    pub(super) fn lapse_idle_lease(&mut self, now: Instant, out: &mut Vec<Output>) {
        let sessions = &self.sessions;
        let busy = |holder: &str| sessions.get(holder).is_some_and(|s| !s.in_flight.is_empty());
        if let Some(holder) = self.lease.lapse(now, self.config.lease_timeout, busy) {
            self.announce_release(&holder, now, "lease expired", out);
        }
    }

    fn announce_release(
        &mut self,
        session_id: &str,
        now: Instant,
        reason: &str,
        out: &mut Vec<Output>,
    ) {
        out.push(Output::LeaseReleased { session: session_id.to_string() });
        tracing::info!(session = short_id(session_id), reason, "motion lease released");
        self.broadcast_lease(now, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaa-session";
    const B: &str = "bbbbbbbb-session";

    #[test]
    fn one_session_holds_the_lease_until_it_releases_it() {
        let t0 = Instant::now();
        let mut lease = Lease::default();
        assert_eq!((lease.check(A), lease.check(B)), (Ok(()), Ok(())));
        assert!(lease.acquire(A, t0), "newly taken");
        assert!(!lease.acquire(A, t0), "already held");
        assert_eq!(lease.holder(), Some(A));
        assert_eq!(lease.check(B), Err(LeaseError::HeldByAnother { holder: "aaaaaaaa".into() }));
        assert!(lease.check(B).unwrap_err().to_string().contains("held by session aaaaaaaa;"));
        assert!(!lease.release(B), "only the holder releases it");
        assert!(lease.release(A));
        assert_eq!((lease.holder(), lease.check(B)), (None, Ok(())));
    }

    #[test]
    fn an_unused_lease_lapses_after_the_timeout_but_not_while_busy() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(30);
        let mut lease = Lease::default();
        lease.acquire(A, t0);
        lease.renew(B, t0 + Duration::from_secs(20));
        lease.renew(A, t0 + Duration::from_secs(10));
        assert_eq!(
            lease.lapse(t0 + Duration::from_secs(40), timeout, |_| false),
            None,
            "renewed at 10 s: 30 s later is not past the timeout"
        );
        assert_eq!(
            lease.lapse(t0 + Duration::from_secs(41), timeout, |_| true),
            None,
            "a busy holder keeps it"
        );
        assert_eq!(
            lease.lapse(t0 + Duration::from_secs(41), timeout, |_| false),
            Some(A.to_string())
        );
        assert_eq!(lease.holder(), None);
        assert_eq!(lease.lapse(t0 + Duration::from_secs(99), timeout, |_| false), None);
    }
}
