//! A bounded history with sequence numbers, shared by both front ends: the
//! AICC session's event ring (replay on resume) and the AI-control
//! dialect's bridge-wide event history (paged `events`). Items get
//! consecutive sequence numbers from 1; at capacity the oldest goes; a
//! reader asks for what came after its cursor and learns how many of those
//! were evicted before it asked.
use std::collections::VecDeque;

/// What a read after a cursor returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<'a, T> {
    /// Retained items after the cursor, ascending by sequence number.
    pub items: Vec<(u64, &'a T)>,
    /// Items after the cursor that were evicted before this read.
    pub dropped: u64,
    /// The cursor to read on from: the last sequence number returned, or
    /// the last one issued when nothing was returned.
    pub next_cursor: u64,
}

#[derive(Debug, Clone)]
pub struct SequencedRing<T> {
    /// Oldest first; sequence numbers are consecutive, so an item's place
    /// follows from its number (no search).
    items: VecDeque<T>,
    capacity: usize,
    /// Sequence number of the last item pushed (0: none yet).
    last_seq: u64,
}

impl<T> SequencedRing<T> {
    /// A ring keeping at most `capacity` items (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // A large bound is reserved as it fills, not up front.
        Self { items: VecDeque::with_capacity(capacity.min(64)), capacity, last_seq: 0 }
    }

    /// Appends an item, evicting the oldest at capacity; returns its
    /// sequence number.
    pub fn push(&mut self, item: T) -> u64 {
        if self.items.len() == self.capacity {
            self.items.pop_front();
        }
        self.items.push_back(item);
        self.last_seq += 1;
        self.last_seq
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The sequence number of the last item pushed (0: none yet).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The sequence number the next item will get.
    pub fn next_seq(&self) -> u64 {
        self.last_seq + 1
    }

    /// The sequence number of the oldest retained item (`next_seq()` when
    /// empty).
    fn first_retained_seq(&self) -> u64 {
        self.next_seq() - self.items.len() as u64
    }

    /// Items after `cursor`, at most `limit`.
    pub fn after(&self, cursor: u64, limit: usize) -> Page<'_, T> {
        self.page_after(cursor, limit, usize::MAX, |_, _| 0)
    }

    /// Items after `cursor`, at most `limit`, whose sizes (`size_of`) add
    /// up to at most `byte_budget`; the first is returned whatever its
    /// size, so that a reader always makes progress.
    pub fn page_after(
        &self,
        cursor: u64,
        limit: usize,
        byte_budget: usize,
        size_of: impl Fn(u64, &T) -> usize,
    ) -> Page<'_, T> {
        let first_retained = self.first_retained_seq();
        let dropped = first_retained
            .saturating_sub(cursor.saturating_add(1))
            .min(self.last_seq.saturating_sub(cursor));
        // `cursor` may be older than the oldest retained, or past the last issued.
        let start = cursor.saturating_add(1).max(first_retained);
        let skip = usize::try_from(start - first_retained).unwrap_or(usize::MAX);
        let mut used = 0usize;
        let mut items = Vec::new();
        for (seq, item) in (start..).zip(self.items.iter().skip(skip)).take(limit) {
            let size = size_of(seq, item);
            if !items.is_empty() && used.saturating_add(size) > byte_budget {
                break;
            }
            used = used.saturating_add(size);
            items.push((seq, item));
        }
        let next_cursor = items.last().map_or(self.last_seq, |(seq, _)| *seq);
        Page { items, dropped, next_cursor }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn ring_of(capacity: usize, count: u64) -> SequencedRing<u64> {
        let mut ring = SequencedRing::new(capacity);
        for n in 1..=count {
            assert_eq!(ring.push(n * 10), n);
        }
        ring
    }

    fn seqs<T>(page: &Page<'_, T>) -> Vec<u64> {
        page.items.iter().map(|(seq, _)| *seq).collect()
    }

    #[test]
    fn an_empty_ring_has_nothing_and_drops_nothing() {
        let ring: SequencedRing<u64> = SequencedRing::new(0);
        assert_eq!((ring.len(), ring.capacity(), ring.last_seq(), ring.next_seq()), (0, 1, 0, 1));
        assert_eq!(ring.after(0, 10), Page { items: vec![], dropped: 0, next_cursor: 0 });
    }

    #[test]
    fn items_keep_their_numbers_across_eviction() {
        let ring = ring_of(3, 10);
        let page = ring.after(0, 100);
        assert_eq!(page.items, vec![(8, &80), (9, &90), (10, &100)]);
        assert_eq!((page.dropped, page.next_cursor), (7, 10));
        assert_eq!(ring.after(8, 100).items, vec![(9, &90), (10, &100)]);
        assert_eq!(
            ring.after(42, 100),
            Page { items: vec![], dropped: 0, next_cursor: 10 },
            "a cursor from the future gets the last seq"
        );
    }

    #[test]
    fn a_budget_stops_before_the_item_that_would_exceed_it_but_never_returns_nothing() {
        let ring = ring_of(10, 5);
        assert_eq!(seqs(&ring.page_after(0, 10, 25, |_, _| 10)), vec![1, 2]);
        assert_eq!(
            seqs(&ring.page_after(0, 10, 3, |_, _| 10)),
            vec![1],
            "one oversize item still comes"
        );
        let page = ring.page_after(3, 10, 1000, |_, _| 10);
        assert_eq!((seqs(&page), page.next_cursor), (vec![4, 5], 5));
    }

    /// A ring after `pushes` pushes of sizes taken in turn from `sizes`.
    fn filled(capacity: usize, pushes: u64, sizes: &[usize]) -> SequencedRing<usize> {
        let mut ring = SequencedRing::new(capacity);
        let mut last = 0;
        for n in 0..pushes {
            let seq = ring.push(sizes[n as usize % sizes.len()]);
            assert!(seq > last, "seqs strictly increase");
            last = seq;
        }
        ring
    }

    /// Every page read from `cursor` on, until one comes back empty.
    fn pages(
        ring: &SequencedRing<usize>,
        cursor: u64,
        limit: usize,
        budget: usize,
    ) -> Vec<Page<'_, usize>> {
        let mut pages = Vec::new();
        let mut at = cursor;
        loop {
            let page = ring.page_after(at, limit, budget, |_, size| *size);
            if page.items.is_empty() {
                return pages;
            }
            at = page.next_cursor;
            pages.push(page);
        }
    }

    proptest! {
        #[test]
        fn paging_returns_every_retained_item_once_and_counts_the_rest_as_dropped(
            capacity in 0usize..16,
            pushes in 0u64..64,
            cursor_back in 0u64..80,
            limit in 1usize..8,
            budget in 0usize..64,
            sizes in proptest::collection::vec(0usize..40, 1..8),
        ) {
            let cursor = pushes.saturating_sub(cursor_back);
            let ring = filled(capacity, pushes, &sizes);
            let pages = pages(&ring, cursor, limit, budget);
            let mut seen = HashSet::new();
            let mut previous = cursor;
            for page in &pages {
                prop_assert!(page.items.len() <= limit);
                let used: usize = page.items.iter().map(|(_, size)| **size).sum();
                prop_assert!(used <= budget || page.items.len() == 1, "over budget: {used} > {budget} in {} items", page.items.len());
                for (seq, _) in &page.items {
                    prop_assert!(*seq > previous, "ascending, after the cursor");
                    prop_assert!(seen.insert(*seq), "seq {seq} returned twice");
                    previous = *seq;
                }
            }
            let dropped = pages.first().map_or_else(|| ring.after(cursor, limit).dropped, |p| p.dropped);
            prop_assert_eq!(dropped + seen.len() as u64, ring.last_seq() - cursor, "dropped + returned account for everything after the cursor");
            prop_assert_eq!(seen.len(), ring.len().min((ring.last_seq() - cursor) as usize), "every retained item after the cursor comes");
            prop_assert!(pages.iter().skip(1).all(|p| p.dropped == 0), "nothing is evicted between reads here");
        }

        #[test]
        fn a_page_is_as_full_as_the_budget_and_limit_allow(
            pushes in 1u64..40,
            cursor in 0u64..40,
            limit in 1usize..10,
            budget in 0usize..100,
            size in 0usize..30,
        ) {
            let ring = filled(16, pushes, &[size]);
            let page = ring.page_after(cursor, limit, budget, |_, size| *size);
            let available = ring.after(cursor, usize::MAX).items.len();
            if available > 0 {
                prop_assert!(!page.items.is_empty(), "at least one item");
            }
            let more_fit = page.items.len() < limit.min(available) && (page.items.len() + 1) * size <= budget;
            prop_assert!(!more_fit, "stopped early: {} items of {size} within {budget}", page.items.len());
        }
    }
}
