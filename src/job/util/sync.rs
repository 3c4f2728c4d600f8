//! Sync: a mutex's lock that survives a panicking holder.
//!
//! It knows std's mutexes; it does not know what they guard.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, also when a thread panicked while holding it (what it guards stays usable).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
