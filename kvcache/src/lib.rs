//! Paged KV-cache bookkeeping (block pool, radix prefix index, copy-on-write forks); no tensor
//! types. The tensor layer owns the K/V memory and asks this crate where each token goes.
//!
//! Modelled on vLLM's block manager, SGLang's radix cache and mistral.rs's paged-attention
//! cache manager: a fixed pool of blocks of `block_size` tokens, per-sequence block tables,
//! refcounted sharing between forks and across requests with a common prompt prefix, and
//! copy-on-write of a shared partially filled block.
//!
//! ```
//! use ponder_kvcache::{CopyBlock, KvCacheConfig, KvCacheManager, Slot};
//!
//! let mut kv = KvCacheManager::new(KvCacheConfig { block_size: 4, num_blocks: 8 })?;
//! let prompt = [1, 2, 3, 4, 5, 6];
//! assert_eq!(kv.open(1, &prompt)?, 0); // nothing cached yet: compute all 6 tokens
//! let a = kv.append(1, &prompt)?; // block 0 fills (and is indexed), block 1 holds 2 tokens
//! assert_eq!(kv.block_table(1), Some(&[0, 1][..]));
//! assert_eq!(a.slots[5], Slot { block: 1, offset: 1 });
//!
//! kv.fork(1, 2)?; // seq 2 shares both blocks; nothing is copied yet
//! let b = kv.append(2, &[7])?; // block 1 is shared and partial: copy-on-write
//! assert_eq!(b.copies, vec![CopyBlock { src: 1, dst: 2, tokens: 2 }]);
//! assert_eq!(b.slots, vec![Slot { block: 2, offset: 2 }]);
//!
//! kv.release(1);
//! kv.release(2); // block 0 stays cached in the prefix index; blocks 1 and 2 are free
//! assert_eq!(kv.stats().cached_blocks, 1);
//! assert_eq!(kv.open(3, &[1, 2, 3, 4, 9])?, 4); // the first block is reused
//! assert_eq!(kv.block_table(3), Some(&[0][..]));
//! assert_eq!(kv.check_invariants(), Ok(()));
//! # Ok::<(), ponder_kvcache::KvCacheError>(())
//! ```

mod block_pool;
mod config;
mod error;
mod invariants;
mod manager;
mod prefix_index;
mod types;

pub use config::KvCacheConfig;
pub use error::{KvCacheError, Result};
pub use manager::KvCacheManager;
pub use types::{Appended, BlockId, CopyBlock, KvCacheStats, SeqId, Slot};

/// How many leading tokens `a` and `b` share.
pub fn shared_prefix_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
