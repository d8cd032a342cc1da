//! A fixed-capacity vector in memory mapped straight from the system. Its pages are touched
//! only as elements are pushed and go back whole when it is dropped, whatever the allocator
//! does with the short-lived blocks around it: what the watchdog's table keeps per held lock
//! shows in RSS as exactly that, and a table emptied gives all of it back.

use std::ptr::NonNull;

pub struct Pages<T> {
    space: Space<T>,
}

enum Space<T> {
    Mapped {
        ptr: NonNull<T>,
        len: usize,
        capacity: usize,
    },
    /// The mapping was refused: the allocator's memory will do.
    Heap(Vec<T>),
}

// SAFETY: a Pages owns its elements as a Vec does.
unsafe impl<T: Send> Send for Pages<T> {}
unsafe impl<T: Sync> Sync for Pages<T> {}

impl<T> Pages<T> {
    pub fn with_capacity(capacity: usize) -> Pages<T> {
        Pages {
            space: map(capacity).map_or_else(
                || Space::Heap(Vec::with_capacity(capacity)),
                |ptr| Space::Mapped {
                    ptr,
                    len: 0,
                    capacity,
                },
            ),
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_full(&self) -> bool {
        match &self.space {
            Space::Mapped { len, capacity, .. } => len == capacity,
            Space::Heap(vec) => vec.len() == vec.capacity(),
        }
    }

    /// Appends `value`; it comes back when there is no room left.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        if self.is_full() {
            return Err(value);
        }
        match &mut self.space {
            Space::Mapped { ptr, len, .. } => {
                // SAFETY: `len < capacity`, so the slot is inside the mapping and unused.
                unsafe { ptr.as_ptr().add(*len).write(value) };
                *len += 1;
            }
            Space::Heap(vec) => vec.push(value),
        }
        Ok(())
    }

    /// Drops every element and keeps the room, so a table that empties and fills again
    /// does not map and unmap memory each time.
    pub fn clear(&mut self) {
        match &mut self.space {
            Space::Mapped { ptr, len, .. } => {
                let initialised = std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), *len);
                // Zero first: a panicking drop then leaks the rest instead of dropping twice.
                *len = 0;
                // SAFETY: the first `len` slots were initialised and owned by self; they are
                // no longer reachable through it, so each is dropped exactly once.
                unsafe { std::ptr::drop_in_place(initialised) };
            }
            Space::Heap(vec) => vec.clear(),
        }
    }

    pub fn as_slice(&self) -> &[T] {
        match &self.space {
            // SAFETY: the first `len` slots are initialised, and owned by self.
            Space::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
            Space::Heap(vec) => vec,
        }
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        match &mut self.space {
            // SAFETY: as above, borrowed mutably through self.
            Space::Mapped { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts_mut(ptr.as_ptr(), *len)
            },
            Space::Heap(vec) => vec,
        }
    }
}

impl<T> Drop for Pages<T> {
    fn drop(&mut self) {
        if let Space::Mapped { ptr, capacity, .. } = &self.space {
            let (ptr, capacity) = (*ptr, *capacity);
            // SAFETY: the initialised slots are dropped once, then the mapping made for
            // `capacity` elements is unmapped.
            unsafe {
                std::ptr::drop_in_place(self.as_mut_slice());
                libc::munmap(ptr.as_ptr().cast(), bytes::<T>(capacity));
            }
        }
    }
}

fn bytes<T>(capacity: usize) -> usize {
    std::mem::size_of::<T>().saturating_mul(capacity).max(1)
}

/// Private anonymous memory for `capacity` elements (page-aligned, so aligned for any `T`
/// with an alignment up to a page); `None` when the system refuses.
fn map<T>(capacity: usize) -> Option<NonNull<T>> {
    if std::mem::align_of::<T>() > 4096 || capacity == 0 {
        return None;
    }
    // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes::<T>(capacity),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(ptr.cast())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn pushes_up_to_capacity_then_gives_the_value_back() {
        let mut pages = Pages::with_capacity(3);
        for n in 0..3 {
            assert!(pages.push(n).is_ok());
        }
        assert!(pages.is_full());
        assert_eq!(pages.push(9), Err(9));
        pages.as_mut_slice()[1] = 7;
        assert_eq!(pages.as_slice(), &[0, 7, 2]);
    }

    #[test]
    fn dropping_drops_every_element_once() {
        let counted = Rc::new(());
        {
            let mut pages = Pages::with_capacity(100);
            for _ in 0..10 {
                assert!(pages.push(counted.clone()).is_ok());
            }
            assert_eq!(Rc::strong_count(&counted), 11);
        }
        assert_eq!(Rc::strong_count(&counted), 1);
    }

    #[test]
    fn clearing_drops_every_element_once_and_keeps_the_room() {
        let counted = Rc::new(());
        let mut pages = Pages::with_capacity(4);
        for _ in 0..4 {
            assert!(pages.push(counted.clone()).is_ok());
        }
        pages.clear();
        assert_eq!(Rc::strong_count(&counted), 1);
        assert!(pages.is_empty());
        for _ in 0..4 {
            assert!(pages.push(counted.clone()).is_ok());
        }
        assert!(pages.is_full());
        drop(pages);
        assert_eq!(Rc::strong_count(&counted), 1);
    }
}
