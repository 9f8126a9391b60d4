//! The host heap of gpukit's own programs (the `gpukit` command and the Python module): both use
//! mimalloc as their global allocator, set up by [`keep_freed_pages`] to keep what is freed.
//!
//! glibc's malloc maps each allocation of more than 32 MiB afresh and unmaps it on free, so a
//! CPU pipeline that allocates a large intermediate tensor per layer (the CPU voice's HiFi-GAN
//! decoder) has the kernel fault in and zero every one of them again: a sixth of its time on a
//! 2-core machine. mimalloc hands freed pages to the next allocation; by default it returns
//! them to the system after a delay, which the same pipeline outlives between calls.

/// The allocator to declare with `#[global_allocator]` in a program that calls
/// [`keep_freed_pages`].
pub use mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its place in the option enum of mimalloc.h, v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Tells mimalloc never to return freed memory to the system: the process keeps its peak host
/// memory, and large allocations cost no page faults. Call it first thing in a program whose
/// global allocator is [`MiMalloc`] (elsewhere it only configures an allocator nobody uses).
pub fn keep_freed_pages() {
    // SAFETY: sets one of mimalloc's options to a value it documents (-1: never purge).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

#[cfg(test)]
mod tests {
    /// The option set is the purge delay: its documented default (1000 ms in mimalloc v3, 10 in
    /// v2) before, -1 after.
    #[test]
    fn the_purge_delay_is_the_option_set() {
        // SAFETY: reads a mimalloc option.
        let before = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert!(before == 1000 || before == 10 || before == -1, "{before}");
        super::keep_freed_pages();
        // SAFETY: reads a mimalloc option.
        let after = unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) };
        assert_eq!(after, -1);
    }
}
