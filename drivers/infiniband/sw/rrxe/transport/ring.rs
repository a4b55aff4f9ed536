// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out ring of fixed capacity, with no allocation: the
//! engine's completions and events wait in such rings for the glue, and the
//! driver keeps the packets it hands to a QP's next run in one.

/// Up to `N` items, taken out in the order they were put in.
#[derive(Clone, Copy, Debug)]
pub struct Ring<T, const N: usize> {
    buf: [Option<T>; N],
    head: usize,
    len: usize,
}

impl<T, const N: usize> Ring<T, N> {
    /// An empty ring.
    pub const fn new() -> Self {
        Self {
            buf: [const { None }; N],
            head: 0,
            len: 0,
        }
    }

    /// Whether it holds `N` items.
    pub const fn is_full(&self) -> bool {
        self.len == N
    }

    /// Whether it holds none.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of items held.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Appends `item`; returns it back if the ring is full.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        let slot = (self.head + self.len) % N;
        self.buf[slot] = Some(item);
        self.len += 1;
        Ok(())
    }

    /// Takes the oldest item.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.buf[self.head].take();
        self.head = (self.head + 1) % N;
        self.len -= 1;
        item
    }

    /// Drops every item held.
    pub fn clear(&mut self) {
        *self = Self::new();
    }
}

impl<T, const N: usize> Default for Ring<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_fifo_and_capacity() {
        let mut ring: Ring<u32, 3> = Ring::new();
        assert_eq!(ring.pop(), None);
        for i in 0..3 {
            ring.push(i).unwrap();
        }
        assert_eq!(ring.push(9), Err(9));
        assert_eq!(ring.pop(), Some(0));
        ring.push(3).unwrap();
        assert_eq!(ring.len(), 3);
        assert_eq!(
            [ring.pop(), ring.pop(), ring.pop()],
            [Some(1), Some(2), Some(3)]
        );
        assert_eq!(ring.pop(), None);
    }

    #[test]
    fn ring_of_owned_items_drops_them_on_clear() {
        use std::rc::Rc;
        let item = Rc::new(());
        let mut ring: Ring<Rc<()>, 2> = Ring::new();
        ring.push(item.clone()).unwrap();
        ring.push(item.clone()).unwrap();
        assert_eq!(Rc::strong_count(&item), 3);
        ring.clear();
        assert!(ring.is_empty());
        assert_eq!(Rc::strong_count(&item), 1);
    }
}
