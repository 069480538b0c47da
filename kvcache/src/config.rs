//! [`KvCacheConfig`]: the pool's shape (tokens per block, number of blocks) and its validation.
//!
//! Invariant of a validated config: `block_size >= 1` and `1 <= num_blocks <= u32::MAX`, so every
//! block id fits a [`BlockId`](crate::BlockId).

use crate::error::{KvCacheError, Result};

/// Shape of the paged KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCacheConfig {
    /// Tokens per block (vLLM's default is 16).
    pub block_size: usize,
    /// Blocks in the pool.
    pub num_blocks: usize,
}

/// Largest pool whose ids fit a `BlockId` (`u32`).
const MAX_BLOCKS: u64 = u32::MAX as u64;

impl KvCacheConfig {
    /// Blocks that fit in `bytes` when one block costs `bytes_per_block` (error if 0 blocks fit).
    ///
    /// A budget larger than `u32::MAX` blocks is clamped to `u32::MAX` blocks.
    pub fn from_memory(bytes: u64, bytes_per_block: u64, block_size: usize) -> Result<Self> {
        if bytes_per_block == 0 {
            return Err(KvCacheError::InvalidConfig(
                "bytes_per_block must be > 0".into(),
            ));
        }
        let blocks = (bytes / bytes_per_block).min(MAX_BLOCKS);
        if blocks == 0 {
            return Err(KvCacheError::InvalidConfig(format!(
                "no block fits: {bytes} bytes available, {bytes_per_block} bytes per block"
            )));
        }
        let num_blocks = usize::try_from(blocks).map_err(|_| {
            KvCacheError::InvalidConfig(format!("num_blocks {blocks} does not fit usize"))
        })?;
        let cfg = Self {
            block_size,
            num_blocks,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the invariants stated in the module doc.
    pub fn validate(&self) -> Result<()> {
        if self.block_size == 0 {
            return Err(KvCacheError::InvalidConfig("block_size must be > 0".into()));
        }
        if self.num_blocks == 0 {
            return Err(KvCacheError::InvalidConfig("num_blocks must be > 0".into()));
        }
        if self.num_blocks as u64 > MAX_BLOCKS {
            return Err(KvCacheError::InvalidConfig(format!(
                "num_blocks {} exceeds the BlockId range ({MAX_BLOCKS})",
                self.num_blocks
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_memory_floors_to_whole_blocks() -> Result<()> {
        let cfg = KvCacheConfig::from_memory(1000, 300, 16)?;
        assert_eq!(
            cfg,
            KvCacheConfig {
                block_size: 16,
                num_blocks: 3
            }
        );
        Ok(())
    }

    #[test]
    fn from_memory_rejects_zero_blocks_and_zero_costs() {
        assert!(matches!(
            KvCacheConfig::from_memory(299, 300, 16),
            Err(KvCacheError::InvalidConfig(_))
        ));
        assert!(matches!(
            KvCacheConfig::from_memory(1000, 0, 16),
            Err(KvCacheError::InvalidConfig(_))
        ));
        assert!(matches!(
            KvCacheConfig::from_memory(1000, 10, 0),
            Err(KvCacheError::InvalidConfig(_))
        ));
    }

    #[test]
    fn from_memory_clamps_to_block_id_range() -> Result<()> {
        let cfg = KvCacheConfig::from_memory(u64::MAX, 1, 16)?;
        assert_eq!(cfg.num_blocks as u64, MAX_BLOCKS);
        Ok(())
    }

    #[test]
    fn validate_rejects_empty_pool() {
        let cfg = KvCacheConfig {
            block_size: 16,
            num_blocks: 0,
        };
        assert!(matches!(
            cfg.validate(),
            Err(KvCacheError::InvalidConfig(_))
        ));
    }
}
