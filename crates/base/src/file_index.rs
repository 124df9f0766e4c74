//! Native file indexes for the `toolhost:plugin/files` import: a file's
//! SHA-256, size, line count, text check and where every `stride`-th line
//! starts, computed once from an open file and cached host-wide.
//!
//! The sandbox's `files_link` resolves the guest's path to an open file
//! (beneath the call's mount, see [`crate::opendir`]); this module only
//! reads that file and remembers what it found:
//!
//! - [`index_bytes`] is the pure computation (one pass for lines and the
//!   text check, SHA-256 with the `sha2` crate, which uses the CPU's SHA
//!   instructions where there are any); a file is fed to it in 64 KiB
//!   pieces, so indexing holds no more of a file than that.
//! - [`IndexCache`] keys results by the opened file's identity and
//!   timestamps, `(st_dev, st_ino, size, mtime_ns, ctime_ns)` from `fstat`
//!   of the very descriptor that is read. Any write changes the mtime and
//!   the ctime; setting the mtime back (`touch -d`, a same-tick rewrite)
//!   still changes the ctime, which no one can set. The racy-timestamp rule
//!   (as git's index has it): a file whose mtime or ctime is within a
//!   window of now is never cached, because a second write in the same
//!   clock tick could leave every timestamp as it was; such a file is
//!   indexed afresh on each request. The window is one the file system's
//!   ticks fit in: [`RACY_WINDOW`] (2 s: FAT keeps modification times in
//!   2-second steps, ext3 in seconds) unless both of the file's timestamps
//!   have a sub-second part, which only a file system with fine timestamps
//!   gives them; those come from the kernel's coarse clock, which moves at
//!   least every 10 ms, and [`FINE_RACY_WINDOW`] is five times that. A file
//!   just written (an agent edits, then reads) is cached after 50 ms, not
//!   after 2 s.
//! - The cache is bounded ([`MAX_ENTRIES`] entries and [`MAX_CACHED_BYTES`]
//!   of line-start data), least recently used out first.
//! - [`read_range`] reads part of an open file for the import's `read`, with
//!   the size and mtime of the descriptor it read through: what a plugin
//!   compares with an index to know the bytes are from the indexed file.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

/// The most bytes the host reads for one index, whatever the plugin asks:
/// 64 MiB.
pub const HOST_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Every how many lines a start is recorded.
pub const STRIDE: u32 = 64;

/// A file changed this recently (mtime or ctime) is not cached.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// [`RACY_WINDOW`] for a file whose mtime and ctime both have a sub-second
/// part (a file system with fine timestamps, whose clock ticks at least
/// every 10 ms).
pub const FINE_RACY_WINDOW: Duration = Duration::from_millis(50);

/// Most entries the cache keeps.
pub const MAX_ENTRIES: usize = 256;

/// Most line-start data (8 bytes a start) the cache keeps: 64 MiB.
pub const MAX_CACHED_BYTES: usize = 64 * 1024 * 1024;

/// What the host knows about one file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileIndex {
    /// Lowercase hex SHA-256.
    pub sha256: String,
    pub size: u64,
    /// Lines as `str::lines()` counts them.
    pub lines: u64,
    /// Valid UTF-8 without a NUL byte.
    pub is_text: bool,
    pub stride: u32,
    /// Byte offsets of lines 1, 1 + stride, …
    pub line_starts: Vec<u64>,
    /// The file's mtime when read, in nanoseconds since the Unix epoch.
    pub mtime_ns: u64,
}

/// Why a file could not be indexed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// Larger than the limit applied (carried, in bytes).
    #[error("the file is larger than {0} bytes")]
    TooLarge(u64),
    #[error("reading the file failed: {0}")]
    Io(#[from] io::Error),
}

/// The identity and version of an opened file: what a cached index is
/// valid for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileKey {
    /// The key of an open file, from `fstat` of its descriptor.
    pub fn of(file: &File) -> io::Result<FileKey> {
        let st = rustix::fs::fstat(file)?;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Ok(FileKey {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size as u64,
            #[allow(clippy::unnecessary_cast)]
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            #[allow(clippy::unnecessary_cast)]
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
        })
    }

    /// Whether the file changed within its racy window of `now` (or claims
    /// a time after it): its timestamps cannot tell a later same-tick write
    /// apart, so its index must not be cached.
    pub fn is_racy(&self, now: SystemTime) -> bool {
        let now_ns = match now.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(_) => return true,
        };
        let window = self.racy_window().as_nanos() as i128;
        self.mtime_ns > now_ns - window || self.ctime_ns > now_ns - window
    }

    /// [`FINE_RACY_WINDOW`] when both timestamps have a sub-second part,
    /// else [`RACY_WINDOW`] (a whole second may be all the file system
    /// keeps; a fine one gives a whole second once in many writes, and
    /// that file only waits longer).
    fn racy_window(&self) -> Duration {
        let fraction = |ns: i128| ns.rem_euclid(1_000_000_000) != 0;
        if fraction(self.mtime_ns) && fraction(self.ctime_ns) {
            FINE_RACY_WINDOW
        } else {
            RACY_WINDOW
        }
    }
}

/// Indexes `bytes` (the whole file) with `mtime_ns` as its modification
/// time.
pub fn index_bytes(bytes: &[u8], mtime_ns: u64) -> FileIndex {
    let mut indexer = Indexer::default();
    indexer.feed(bytes);
    indexer.finish(mtime_ns)
}

/// Bytes read from a file per step: what the host holds of a file while
/// it indexes it, whatever the file's size.
const READ_CHUNK: usize = 64 * 1024;

/// The index computed over a file fed in pieces of any size: the same
/// result as [`index_bytes`] over the whole.
#[derive(Default)]
struct Indexer {
    sha: Sha256,
    size: u64,
    newlines: u64,
    line_starts: Vec<u64>,
    last: Option<u8>,
    has_nul: bool,
    /// False once an invalid UTF-8 sequence was seen.
    utf8_bad: bool,
    /// The start of a UTF-8 sequence cut by the end of the last piece.
    pending: Vec<u8>,
}

impl Indexer {
    fn feed(&mut self, piece: &[u8]) {
        if piece.is_empty() {
            return;
        }
        self.sha.update(piece);
        if self.size == 0 {
            self.line_starts.push(0);
        }
        let stride = u64::from(STRIDE);
        // `memchr` scans a word (or a vector) at a time: this loop visits
        // only the line ends.
        for at in memchr::memchr_iter(b'\n', piece) {
            self.newlines += 1;
            // Line `newlines + 1` starts after this byte (a start at the
            // very end of the file is dropped by `finish`).
            if self.newlines % stride == 0 {
                self.line_starts.push(self.size + at as u64 + 1);
            }
        }
        self.has_nul |= memchr::memchr(0, piece).is_some();
        self.check_utf8(piece);
        self.size += piece.len() as u64;
        self.last = piece.last().copied();
    }

    /// UTF-8 validity across pieces: a sequence cut at a piece's end is
    /// kept and completed with the next piece's first bytes.
    fn check_utf8(&mut self, mut piece: &[u8]) {
        if self.utf8_bad {
            return;
        }
        if !self.pending.is_empty() {
            let take = piece.len().min(4 - self.pending.len());
            let mut joined = self.pending.clone();
            joined.extend_from_slice(&piece[..take]);
            match std::str::from_utf8(&joined) {
                Ok(_) => piece = &piece[take..],
                // The cut sequence is complete; what follows is checked
                // with the rest of the piece.
                Err(e) if e.valid_up_to() > self.pending.len() => {
                    piece = &piece[e.valid_up_to() - self.pending.len()..];
                }
                // Still cut (a piece shorter than the sequence).
                Err(e) if e.error_len().is_none() => {
                    self.pending = joined;
                    return;
                }
                Err(_) => {
                    self.utf8_bad = true;
                    return;
                }
            }
            self.pending.clear();
        }
        if let Err(e) = std::str::from_utf8(piece) {
            match e.error_len() {
                None => self.pending = piece[e.valid_up_to()..].to_vec(),
                Some(_) => self.utf8_bad = true,
            }
        }
    }

    fn finish(mut self, mtime_ns: u64) -> FileIndex {
        if self.line_starts.last() == Some(&self.size) && self.size > 0 {
            // A final line ending starts no line.
            self.line_starts.pop();
        }
        let lines = match self.last {
            None => 0,
            Some(b'\n') => self.newlines,
            Some(_) => self.newlines + 1,
        };
        if lines == 0 {
            self.line_starts.clear();
        }
        FileIndex {
            sha256: hex::encode(self.sha.finalize()),
            size: self.size,
            lines,
            is_text: !self.has_nul && !self.utf8_bad && self.pending.is_empty(),
            stride: STRIDE,
            line_starts: self.line_starts,
            mtime_ns,
        }
    }
}

/// Reads the open regular file `file` (whose `fstat` gave `key`) from its
/// start, at most `limit` bytes, a piece at a time, and indexes it.
fn read_and_index(file: &mut File, key: &FileKey, limit: u64) -> Result<FileIndex, IndexError> {
    if key.size > limit {
        return Err(IndexError::TooLarge(limit));
    }
    file.seek(SeekFrom::Start(0))?;
    let mut indexer = Indexer::default();
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if indexer.size + n as u64 > limit {
            // It grew while being read.
            return Err(IndexError::TooLarge(limit));
        }
        indexer.feed(&buf[..n]);
    }
    let mtime_ns = u64::try_from(key.mtime_ns.max(0)).unwrap_or(u64::MAX);
    Ok(indexer.finish(mtime_ns))
}

/// Bytes of a file and the file's size and mtime when they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileBytes {
    pub bytes: Vec<u8>,
    pub size: u64,
    /// Nanoseconds since the Unix epoch, as [`FileIndex::mtime_ns`].
    pub mtime_ns: u64,
}

/// Reads at most `len` bytes of the open file `file` from byte `offset`
/// (fewer where it ends), then takes its size and mtime from the same
/// descriptor: a write that raced the read changes them. A `len` over
/// `cap` (at most [`HOST_MAX_BYTES`] is ever read) is
/// [`IndexError::TooLarge`] with the cap applied.
pub fn read_range(file: &File, offset: u64, len: u64, cap: u64) -> Result<FileBytes, IndexError> {
    use std::os::unix::fs::FileExt;
    let cap = cap.min(HOST_MAX_BYTES);
    if len > cap {
        return Err(IndexError::TooLarge(cap));
    }
    let want = usize::try_from(len).map_err(|_| IndexError::TooLarge(cap))?;
    // No more room than the file can give from `offset` now.
    let size_now = FileKey::of(file)?.size;
    let mut bytes = vec![0u8; want.min(size_now.saturating_sub(offset) as usize)];
    let mut got = 0;
    while got < bytes.len() {
        match file.read_at(&mut bytes[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bytes.truncate(got);
    let key = FileKey::of(file)?;
    Ok(FileBytes {
        bytes,
        size: key.size,
        mtime_ns: u64::try_from(key.mtime_ns.max(0)).unwrap_or(u64::MAX),
    })
}

/// Counters of an [`IndexCache`], for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Answered from the cache.
    pub hits: u64,
    /// Read and indexed.
    pub misses: u64,
    /// Indexed but not kept: the file was racy or changed while read.
    pub uncached: u64,
    pub entries: usize,
}

#[derive(Debug, Default)]
struct Inner {
    map: HashMap<FileKey, (Arc<FileIndex>, u64)>,
    /// Use counter: the entry with the smallest stamp goes first.
    clock: u64,
    bytes: usize,
    stats: CacheStats,
}

/// The host-wide cache of file indexes (one per sandbox, shared by every
/// call).
#[derive(Debug, Default)]
pub struct IndexCache {
    inner: Mutex<Inner>,
}

impl IndexCache {
    pub fn new() -> IndexCache {
        IndexCache::default()
    }

    /// The index of the open regular file `file`, at most `limit` bytes
    /// read, from the cache when the file's key matches an entry.
    pub fn index(&self, file: &mut File, limit: u64) -> Result<Arc<FileIndex>, IndexError> {
        self.index_at(file, limit, SystemTime::now())
    }

    /// [`index`](Self::index) with `now` as the current time (for the
    /// racy-timestamp rule).
    pub fn index_at(
        &self,
        file: &mut File,
        limit: u64,
        now: SystemTime,
    ) -> Result<Arc<FileIndex>, IndexError> {
        let limit = limit.min(HOST_MAX_BYTES);
        let key = FileKey::of(file)?;
        if key.size > limit {
            return Err(IndexError::TooLarge(limit));
        }
        if let Some(hit) = self.lookup(&key) {
            return Ok(hit);
        }
        let index = Arc::new(read_and_index(file, &key, limit)?);
        // Keep it only if the file was not changing: not racy, and the
        // same before and after the read.
        let after = FileKey::of(file)?;
        let mut inner = self.lock();
        inner.stats.misses += 1;
        if key.is_racy(now) || after != key || index.size != key.size {
            inner.stats.uncached += 1;
        } else {
            inner.insert(key, index.clone());
        }
        Ok(index)
    }

    /// The cached index of the open file `file` if there is one for what
    /// it is now (its key from `fstat`); reads nothing, indexes nothing and
    /// counts nothing.
    pub fn peek(&self, file: &File) -> Option<Arc<FileIndex>> {
        let key = FileKey::of(file).ok()?;
        let inner = self.lock();
        inner.map.get(&key).map(|(index, _)| index.clone())
    }

    /// Caches `index` for what the open file `file` is now, whatever it
    /// holds (tests plant indexes with it).
    #[cfg(test)]
    pub fn remember(&self, file: &File, index: FileIndex) {
        let key = FileKey::of(file).unwrap();
        self.lock().insert(key, Arc::new(index));
    }

    fn lookup(&self, key: &FileKey) -> Option<Arc<FileIndex>> {
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let hit = inner.map.get_mut(key).map(|(index, used)| {
            *used = clock;
            index.clone()
        });
        if hit.is_some() {
            inner.stats.hits += 1;
        }
        hit
    }

    /// The cache's counters.
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            entries: inner.map.len(),
            ..inner.stats
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn cost(index: &FileIndex) -> usize {
        index.line_starts.len() * 8 + 128
    }

    fn insert(&mut self, key: FileKey, index: Arc<FileIndex>) {
        self.clock += 1;
        let cost = Inner::cost(&index);
        if let Some((old, _)) = self.map.insert(key, (index, self.clock)) {
            self.bytes -= Inner::cost(&old);
        }
        self.bytes += cost;
        while self.map.len() > MAX_ENTRIES || self.bytes > MAX_CACHED_BYTES {
            let Some(oldest) = self
                .map
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((gone, _)) = self.map.remove(&oldest) {
                self.bytes -= Inner::cost(&gone);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lines_of(s: &str) -> u64 {
        s.lines().count() as u64
    }

    #[test]
    fn read_range_reads_what_is_there_and_the_file_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "0123456789").unwrap();
        let file = File::open(&path).unwrap();
        let key = FileKey::of(&file).unwrap();
        let got = read_range(&file, 2, 3, HOST_MAX_BYTES).unwrap();
        assert_eq!(got.bytes, b"234");
        assert_eq!((got.size, i128::from(got.mtime_ns)), (10, key.mtime_ns));
        // Fewer where the file ends; nothing past it.
        assert_eq!(
            read_range(&file, 8, 100, HOST_MAX_BYTES).unwrap().bytes,
            b"89"
        );
        assert!(read_range(&file, 10, 5, HOST_MAX_BYTES)
            .unwrap()
            .bytes
            .is_empty());
        assert!(read_range(&file, u64::MAX, 5, HOST_MAX_BYTES)
            .unwrap()
            .bytes
            .is_empty());
        assert!(read_range(&file, 0, 0, HOST_MAX_BYTES)
            .unwrap()
            .bytes
            .is_empty());
        assert!(matches!(
            read_range(&file, 0, HOST_MAX_BYTES + 1, u64::MAX),
            Err(IndexError::TooLarge(HOST_MAX_BYTES))
        ));
        // A smaller cap (the call's memory limit) is the one applied.
        assert!(matches!(
            read_range(&file, 0, 5, 4),
            Err(IndexError::TooLarge(4))
        ));
        assert_eq!(read_range(&file, 0, 4, 4).unwrap().bytes, b"0123");
        // A write after the open shows in the size read back.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"ab")
            .unwrap();
        let got = read_range(&file, 9, 10, HOST_MAX_BYTES).unwrap();
        assert_eq!((got.bytes.as_slice(), got.size), (&b"9ab"[..], 12));
    }

    #[test]
    fn counts_lines_like_str_lines_and_records_starts() {
        for s in [
            "", "\n", "a", "a\n", "a\r\nb", "a\n\nb\n", "\r", "x\r", "\n\n\n",
        ] {
            let ix = index_bytes(s.as_bytes(), 0);
            assert_eq!(ix.lines, lines_of(s), "{s:?}");
            assert!(ix.is_text);
        }
        let body: String = (1..=200).map(|i| format!("line {i}\n")).collect();
        let ix = index_bytes(body.as_bytes(), 7);
        assert_eq!(ix.lines, 200);
        assert_eq!(ix.mtime_ns, 7);
        assert_eq!(ix.line_starts.len(), 200_usize.div_ceil(STRIDE as usize));
        for (k, &start) in ix.line_starts.iter().enumerate() {
            let n = k * STRIDE as usize + 1;
            assert!(body[start as usize..].starts_with(&format!("line {n}\n")));
        }
        // A final line ending starts no group of its own.
        let exact: String = "x\n".repeat(STRIDE as usize);
        assert_eq!(index_bytes(exact.as_bytes(), 0).line_starts, [0]);
        assert_eq!(
            index_bytes(b"abc", 0).sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    /// Fed in pieces of any size (cutting lines, multi-byte characters,
    /// a bad sequence or a NUL anywhere), the index is the whole's.
    #[test]
    fn pieces_of_any_size_give_the_index_of_the_whole() {
        let lines: String = (1..=300).map(|i| format!("ligne {i} é€😀\n")).collect();
        let mut bad = lines.clone().into_bytes();
        bad[1000] = 0xff;
        let mut nul = lines.clone().into_bytes();
        nul[2000] = 0;
        let cut = "é€😀".as_bytes()[..6].to_vec(); // 😀 cut after its first byte
        let no_final_newline = format!("{lines}last");
        let exact = "x\n".repeat(STRIDE as usize * 3);
        for body in [
            lines.as_bytes(),
            &bad,
            &nul,
            &cut,
            no_final_newline.as_bytes(),
            exact.as_bytes(),
            b"",
        ] {
            let whole = index_bytes(body, 3);
            for size in [1, 2, 3, 5, 7, 64, 1000, READ_CHUNK] {
                let mut indexer = Indexer::default();
                body.chunks(size).for_each(|p| indexer.feed(p));
                let pieces = indexer.finish(3);
                assert_eq!(
                    (
                        pieces.sha256.as_str(),
                        pieces.size,
                        pieces.lines,
                        pieces.is_text
                    ),
                    (
                        whole.sha256.as_str(),
                        whole.size,
                        whole.lines,
                        whole.is_text
                    ),
                    "pieces of {size}"
                );
                assert_eq!(pieces.line_starts, whole.line_starts, "pieces of {size}");
            }
        }
        assert!(index_bytes(lines.as_bytes(), 0).is_text);
        assert!(!index_bytes(&bad, 0).is_text);
        assert!(!index_bytes(&nul, 0).is_text);
        assert!(!index_bytes(&cut, 0).is_text);
    }

    #[test]
    fn text_check_matches_the_reference_plugin() {
        assert!(!index_bytes(b"a\0b", 0).is_text);
        assert!(!index_bytes(b"caf\xe9", 0).is_text);
        assert!(index_bytes("é€😀\n".as_bytes(), 0).is_text);
    }

    fn file_with(dir: &std::path::Path, name: &str, body: &[u8]) -> File {
        let path = dir.join(name);
        std::fs::File::create(&path)
            .unwrap()
            .write_all(body)
            .unwrap();
        File::open(path).unwrap()
    }

    #[test]
    fn the_racy_window_is_short_only_for_fine_timestamps() {
        let at = |s: i128, ns: i128| s * 1_000_000_000 + ns;
        let key = |mtime_ns, ctime_ns| FileKey {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns,
            ctime_ns,
        };
        let now = |s: u64, ms: u64| UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms);
        // Both timestamps with a sub-second part: settled after 50 ms.
        let fine = key(at(1_000, 123_456_789), at(1_000, 123_456_789));
        assert!(fine.is_racy(now(1_000, 150)));
        assert!(fine.is_racy(now(1_000, 173)));
        assert!(!fine.is_racy(now(1_000, 174)));
        // Either one a whole second (FAT, ext3, or a fine file system by
        // chance): 2 s.
        for coarse in [
            key(at(1_000, 0), at(1_000, 0)),
            key(at(1_000, 0), at(1_000, 10_000_000)),
            key(at(1_000, 10_000_000), at(1_000, 0)),
        ] {
            assert!(coarse.is_racy(now(1_001, 900)), "{coarse:?}");
            assert!(!coarse.is_racy(now(1_002, 20)), "{coarse:?}");
        }
        // The later of the two counts, and a time after now is racy.
        let changed_later = key(at(1_000, 123_456_789), at(1_005, 1));
        assert!(changed_later.is_racy(now(1_005, 40)));
        assert!(!changed_later.is_racy(now(1_005, 60)));
        assert!(fine.is_racy(now(999, 0)));
    }

    #[test]
    fn caches_settled_files_only_and_keys_on_the_ctime() {
        let dir = tempfile::tempdir().unwrap();
        let cache = IndexCache::new();
        let mut f = file_with(dir.path(), "a", b"one\ntwo\n");
        let key = FileKey::of(&f).unwrap();
        // Now: a racy file is indexed each time, never kept.
        let now = SystemTime::now();
        assert!(key.is_racy(now));
        cache.index_at(&mut f, 1024, now).unwrap();
        cache.index_at(&mut f, 1024, now).unwrap();
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.uncached, s.entries), (0, 2, 2, 0));
        // Seen as settled (ten seconds later): kept, then answered from
        // the cache.
        let later = now + Duration::from_secs(10);
        assert!(!key.is_racy(later));
        let first = cache.index_at(&mut f, 1024, later).unwrap();
        let again = cache.index_at(&mut File::open(dir.path().join("a")).unwrap(), 1024, later);
        assert!(Arc::ptr_eq(&first, &again.unwrap()));
        assert_eq!(cache.stats().hits, 1);
        // Same size, new content, the mtime set back: the ctime moved, so
        // the key differs and the new content is read.
        let old_mtime = std::fs::metadata(dir.path().join("a"))
            .unwrap()
            .modified()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("a"))
            .unwrap();
        w.write_all(b"ONE\nTWO\n").unwrap();
        w.set_modified(old_mtime).unwrap();
        drop(w);
        let mut f = File::open(dir.path().join("a")).unwrap();
        let new_key = FileKey::of(&f).unwrap();
        assert_eq!(
            (new_key.size, new_key.mtime_ns),
            (key.size, key.mtime_ns),
            "the same size and mtime"
        );
        assert_ne!(new_key.ctime_ns, key.ctime_ns);
        let fresh = cache.index_at(&mut f, 1024, later).unwrap();
        assert_eq!(fresh.sha256, index_bytes(b"ONE\nTWO\n", 0).sha256);
        assert_ne!(fresh.sha256, first.sha256);
    }

    #[test]
    fn refuses_over_the_limit_without_reading() {
        let dir = tempfile::tempdir().unwrap();
        let cache = IndexCache::new();
        let mut f = file_with(dir.path(), "big", &[b'x'; 100]);
        match cache.index(&mut f, 99) {
            Err(IndexError::TooLarge(99)) => {}
            other => panic!("{other:?}"),
        }
        // The host's own cap bounds any request.
        assert!(cache.index(&mut f, u64::MAX).is_ok());
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let mut inner = Inner::default();
        let key = |ino| FileKey {
            dev: 1,
            ino,
            size: 0,
            mtime_ns: 0,
            ctime_ns: 0,
        };
        let ix = Arc::new(index_bytes(b"x", 0));
        for ino in 0..MAX_ENTRIES as u64 + 10 {
            inner.insert(key(ino), ix.clone());
        }
        assert_eq!(inner.map.len(), MAX_ENTRIES);
        assert!(!inner.map.contains_key(&key(0)));
        assert!(inner.map.contains_key(&key(MAX_ENTRIES as u64 + 9)));
        assert_eq!(inner.bytes, MAX_ENTRIES * Inner::cost(&ix));
    }
}
