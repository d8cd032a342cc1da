//! The C allocator, asked directly.

/// Gives the pages of freed native memory back to the system (glibc keeps them otherwise).
pub fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only gives back memory no allocation uses.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes the C allocator holds from the system, and those of them in live allocations.
pub struct Holding {
    pub from_system: u64,
    pub in_use: u64,
}

/// What glibc's allocator holds now, over all its arenas; `None` elsewhere, or on a glibc
/// older than 2.33 (no `mallinfo2`, looked up when asked so that loading needs none).
pub fn holding() -> Option<Holding> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        type Mallinfo2 = unsafe extern "C" fn() -> libc::mallinfo2;
        // SAFETY: glibc declares `struct mallinfo2 mallinfo2(void)`, as `Mallinfo2` says.
        let mallinfo2 = unsafe { super::uv::function::<Mallinfo2>(c"mallinfo2") }?;
        // SAFETY: takes no argument; it only reads the arenas, under their locks.
        let info = unsafe { mallinfo2() };
        // `arena` is what the arenas took with brk or mmap, `hblkhd` the blocks mmapped alone.
        Some(Holding {
            from_system: (info.arena + info.hblkhd) as u64,
            in_use: (info.uordblks + info.hblkhd) as u64,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
