//! Per-call resource limits that wasmtime enforces through the store.
//!
//! wasmtime asks a [`ResourceLimiter`] about each memory separately; a plugin
//! with several memories could otherwise use the limit once per memory. This
//! limiter keeps the sum across all of an instance's memories, remembers the
//! peak, and records a refusal so a resulting trap is reported as
//! `memory_exhausted` rather than as a crash.

use wasmtime::ResourceLimiter;

/// Memory accounting for one call.
#[derive(Debug, Clone)]
pub struct MemoryLimiter {
    limit_bytes: usize,
    total_bytes: usize,
    peak_bytes: usize,
    refused: bool,
}

impl MemoryLimiter {
    /// A limiter that allows at most `limit_bytes` across all memories.
    pub fn new(limit_bytes: usize) -> Self {
        MemoryLimiter {
            limit_bytes,
            total_bytes: 0,
            peak_bytes: 0,
            refused: false,
        }
    }

    /// The most linear memory the call may have, across all memories.
    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// Largest total linear memory seen during the call.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// Whether a growth was refused because of the limit.
    pub fn refused(&self) -> bool {
        self.refused
    }

    /// Total linear memory now.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Takes over the memory `other` counted: the instance it was counting
    /// for (made ahead of its call, see `spare`) is now this one's.
    pub fn carry(&mut self, other: &MemoryLimiter) {
        self.total_bytes = other.total_bytes;
        self.peak_bytes = self.peak_bytes.max(other.total_bytes);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total = self.total_bytes - current.min(self.total_bytes) + desired;
        if total > self.limit_bytes {
            self.refused = true;
            return Ok(false);
        }
        self.total_bytes = total;
        self.peak_bytes = self.peak_bytes.max(total);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold references; 100k entries is far beyond any real tool.
        Ok(desired <= 100_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_across_memories() {
        let mut l = MemoryLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        // A second memory may not take the rest twice.
        assert!(!l.memory_growing(0, 60, None).unwrap());
        assert!(l.refused());
        assert!(l.memory_growing(0, 40, None).unwrap());
        assert_eq!(l.peak_bytes(), 100);
    }
}
