//! The C allocator, asked directly.

/// Gives the pages of freed native memory back to the system (glibc keeps them otherwise).
pub fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only gives back memory no allocation uses.
    unsafe {
        libc::malloc_trim(0);
    }
}
