//! Where the bridge's message and session ids come from. The protocol core
//! is handed its source instead of drawing UUIDs itself, so that its output
//! follows from its input alone: with [`SequentialIds`] a run can be
//! repeated byte for byte.

/// A source of ids, each different from those before it.
///
/// `Send`: the core that owns one sits behind a lock shared by the
/// shell's tasks.
pub trait IdSource: Send {
    fn next_id(&mut self) -> String;
}

/// Random UUID v4 ids, for production: a session id is what a resume
/// needs, so it must not be guessable.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RandomIds;

impl IdSource for RandomIds {
    fn next_id(&mut self) -> String {
        uuid::Uuid::new_v4().to_string()
    }
}

/// `prefix-1`, `prefix-2`, ...: predictable ids for tests and replays.
/// Never for a served core: its session ids would be guessable.
#[derive(Debug, Clone)]
pub struct SequentialIds {
    prefix: String,
    issued: u64,
}

impl SequentialIds {
    pub fn new(prefix: impl Into<String>) -> Self {
        Self { prefix: prefix.into(), issued: 0 }
    }
}

impl IdSource for SequentialIds {
    fn next_id(&mut self) -> String {
        self.issued += 1;
        format!("{}-{}", self.prefix, self.issued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_up_from_one_and_random_ones_are_uuid_v4() {
        let mut ids = SequentialIds::new("id");
        assert_eq!((ids.next_id(), ids.next_id()), ("id-1".to_string(), "id-2".to_string()));
        let mut random = RandomIds;
        let (a, b) = (random.next_id(), random.next_id());
        assert_ne!(a, b);
        assert_eq!(uuid::Uuid::parse_str(&a).unwrap().get_version_num(), 4);
    }
}
