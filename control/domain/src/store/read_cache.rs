//! A read cache that serves a result only while the generation it was read at holds; see
//! `caches` for what moves the generations (SQLite's commit hooks) and which reads are
//! kept, and `routing` for the inbound routes kept on PostgreSQL.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// Entries a cache keeps at most; when full, entries of older generations go first, then all.
const MAX_ENTRIES: usize = 1024;

/// Results read at a generation, served while it holds.
pub(crate) struct ReadCache<K, V> {
    generation: Arc<AtomicU64>,
    entries: Mutex<HashMap<K, (u64, V)>>,
}

impl<K, V> Default for ReadCache<K, V> {
    fn default() -> Self {
        ReadCache {
            generation: Arc::default(),
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> ReadCache<K, V> {
    /// Serves nothing read so far (a change the hooks cannot see was announced).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// The generation to note before reading from the database.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// The result, if it was read at the current generation.
    pub fn get(&self, key: &K) -> Option<V> {
        let current = self.generation();
        let entries = self.entries.lock();
        match entries.get(key) {
            Some((g, v)) if *g == current => Some(v.clone()),
            _ => None,
        }
    }

    /// Keeps a result read after noting `generation`.
    pub fn put(&self, key: K, generation: u64, value: V) {
        let current = self.generation();
        if generation != current {
            return;
        }
        let mut entries = self.entries.lock();
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
            entries.retain(|_, (g, _)| *g == current);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (generation, value));
    }

    /// The value for `key`: from memory when it was read at the current generation, else
    /// from `read`. A value `keep` accepts is stored under the generation noted *before*
    /// `read` ran, so one that a commit overtook mid-read is never served.
    pub async fn read_through<E>(
        &self,
        key: K,
        keep: impl FnOnce(&V) -> bool,
        read: impl std::future::Future<Output = Result<V, E>>,
    ) -> Result<V, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let noted = self.generation();
        let v = read.await?;
        if keep(&v) {
            self.put(key, noted, v.clone());
        }
        Ok(v)
    }
}

impl<K, V> ReadCache<K, V> {
    /// The generation counter itself, for the hooks that move it.
    pub(super) fn generation_counter(&self) -> Arc<AtomicU64> {
        self.generation.clone()
    }

    /// How many results are kept.
    pub(super) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page's key and a page (its rows left out, its total kept), as the user list
    /// keeps them.
    type Key = (String, i64);
    type Page = (Arc<[String]>, i64);

    fn key(offset: i64) -> Key {
        ("acc_1".into(), offset)
    }

    fn page(total: i64) -> Page {
        (Arc::from(Vec::new()), total)
    }

    #[test]
    fn a_page_is_served_only_at_the_generation_it_was_read_at() {
        let c: ReadCache<Key, Page> = ReadCache::default();
        let g = c.generation();
        c.put(key(0), g, page(7));
        assert_eq!(c.get(&key(0)).map(|p| p.1), Some(7));
        assert!(c.get(&key(100)).is_none(), "another page was never read");
        c.generation.fetch_add(1, Ordering::SeqCst);
        assert!(c.get(&key(0)).is_none(), "a commit changed users since");
    }

    #[test]
    fn a_page_read_across_a_commit_is_not_kept() {
        let c: ReadCache<Key, Page> = ReadCache::default();
        let noted = c.generation();
        c.generation.fetch_add(1, Ordering::SeqCst); // the commit lands mid-read
        c.put(key(0), noted, page(1));
        assert!(c.get(&key(0)).is_none());
    }

    #[tokio::test]
    async fn read_through_keeps_only_what_no_commit_overtook() {
        let c: ReadCache<Key, Page> = ReadCache::default();
        let read = |total| async move { Ok::<_, ()>(page(total)) };
        // A commit lands while the page is read: served once, not kept.
        let overtaken = async {
            c.generation.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ()>(page(1))
        };
        assert_eq!(
            c.read_through(key(0), |_| true, overtaken).await.unwrap().1,
            1
        );
        assert!(c.get(&key(0)).is_none());
        // A clean read is kept and then served without reading.
        assert_eq!(
            c.read_through(key(0), |_| true, read(2)).await.unwrap().1,
            2
        );
        assert_eq!(
            c.read_through(key(0), |_| true, read(3)).await.unwrap().1,
            2
        );
        // What `keep` refuses is returned but not kept; an error is passed on.
        assert_eq!(
            c.read_through(key(5), |_| false, read(4)).await.unwrap().1,
            4
        );
        assert!(c.get(&key(5)).is_none());
        assert!(
            c.read_through(key(6), |_| true, async { Err(()) })
                .await
                .is_err()
        );
    }

    #[test]
    fn a_full_cache_makes_room() {
        let c: ReadCache<Key, Page> = ReadCache::default();
        for i in 0..MAX_ENTRIES as i64 {
            c.put(key(i), 0, page(i));
        }
        c.put(key(-1), 0, page(-1));
        assert!(c.entries.lock().len() <= MAX_ENTRIES);
        assert_eq!(c.get(&key(-1)).map(|p| p.1), Some(-1));
    }
}
