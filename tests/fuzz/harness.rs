//! Bounded fuzz-style property testing on the stable toolchain, shared by every crate's
//! `tests/fuzz.rs` (each includes this file with `#[path]`; it is not a crate of its own).
//!
//! A run replays every file of the target's corpus directory first, then feeds mutations of
//! those seeds (bit flips, byte insert/delete, interesting integers, dictionary tokens,
//! repeated ranges, splices of two seeds, truncation) and occasionally plain random bytes.
//! Each input runs inside `catch_unwind`; a panic, an invariant the target reports as `Err`,
//! or an input slower than `PER_INPUT_LIMIT` fails the test with the seed, the iteration and
//! the input (hex and escaped text), and writes the input under
//! `$CARGO_TARGET_TMPDIR/fuzz-failures/` so it can be copied into the corpus. A watchdog thread
//! aborts the process on an input that never returns (a hang), after printing the same.
//!
//! Environment:
//! - `CALLSMITH_FUZZ_SEED`: the PRNG seed (a u64, or `random` for one taken from the clock).
//!   Default: a fixed seed per target, so a plain `cargo test` is reproducible.
//! - `CALLSMITH_FUZZ_SECS`: the time budget per target in seconds (default 3). When it is
//!   set, the per-target iteration cap is lifted, so the budget alone bounds a long session.

#![allow(dead_code)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most time one input may take before the run fails (debug build, shared CI cores).
pub const PER_INPUT_LIMIT: Duration = Duration::from_secs(1);
/// An input still running after this long is a hang: the watchdog aborts the process.
const HANG_LIMIT: Duration = Duration::from_secs(20);
/// Default time budget per target.
const DEFAULT_SECS: f64 = 3.0;
/// Mutated inputs are capped at this many bytes.
const MAX_LEN: usize = 64 * 1024;

/// Tokens the mutator inserts or overwrites with: separators, numeric edge cases, unicode.
const DICT: &[&[u8]] = &[
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"\0",
    b" ",
    b":",
    b";",
    b",",
    b"/",
    b"=",
    b"{{",
    b"}}",
    b"$",
    b"[",
    b"]",
    b"\"",
    b"0",
    b"-1",
    b"255",
    b"256",
    b"65535",
    b"65536",
    b"2147483647",
    b"2147483648",
    b"4294967295",
    b"4294967296",
    b"18446744073709551616",
    b"99999999999999999999999999999999",
    b"1e308",
    b"-0",
    b"NaN",
    "\u{e9}".as_bytes(),
    "\u{202e}".as_bytes(),
    "\u{1f600}".as_bytes(),
    "\u{feff}".as_bytes(),
    b"\xff\xfe",
    b"\xc3",
];

/// xorshift64*: small, fast and deterministic for a given seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
    /// An "interesting" integer of 1, 2 or 4 bytes, big- or little-endian.
    pub fn interesting_int(&mut self) -> Vec<u8> {
        const V: &[u64] = &[
            0,
            1,
            0x7f,
            0x80,
            0xff,
            0x100,
            0x7fff,
            0x8000,
            0xffff,
            0x1_0000,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
        ];
        let v = V[self.below(V.len())];
        let width = [1, 2, 4][self.below(3)];
        let be = v.to_be_bytes();
        let mut b = be[8 - width..].to_vec();
        if self.chance(2) {
            b.reverse();
        }
        b
    }
}

/// One mutation step applied to `data` in place; `other` is another seed for splicing.
pub fn mutate_once(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    let len = data.len();
    match rng.below(11) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = rng.byte();
        }
        2 => {
            let i = rng.below(len + 1);
            let n = 1 + rng.below(8);
            let b = rng.bytes(n);
            data.splice(i..i, b);
        }
        3 if len > 0 => {
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(16));
            data.drain(i..i + n);
        }
        4 => {
            let i = rng.below(len + 1);
            let tok = DICT[rng.below(DICT.len())];
            data.splice(i..i, tok.iter().copied());
        }
        5 if len > 0 => {
            let i = rng.below(len);
            let v = rng.interesting_int();
            let end = (i + v.len()).min(len);
            data[i..end].copy_from_slice(&v[..end - i]);
        }
        6 if len > 0 => {
            // Repeat a token-sized range many times (long headers, deep nesting).
            let i = rng.below(len);
            let n = 1 + rng.below((len - i).min(32));
            let times = 1 + rng.below(64);
            let chunk = data[i..i + n].to_vec();
            let at = i + n;
            data.splice(at..at, chunk.iter().copied().cycle().take(n * times));
        }
        7 if !other.is_empty() => {
            // Splice: a prefix of this seed with a suffix of another.
            let cut = rng.below(len + 1);
            let from = rng.below(other.len());
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        8 if len > 0 => {
            data.truncate(rng.below(len));
        }
        9 if len > 1 => {
            // Swap two bytes (reorders fields and separators).
            let (i, j) = (rng.below(len), rng.below(len));
            data.swap(i, j);
        }
        _ => {
            let i = rng.below(len + 1);
            let v = rng.interesting_int();
            data.splice(i..i, v);
        }
    }
    data.truncate(MAX_LEN);
}

/// A fresh input: a mutated seed most of the time, plain random bytes sometimes.
pub fn next_input(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if seeds.is_empty() || rng.chance(16) {
        let n = rng.below(512);
        return rng.bytes(n);
    }
    let mut data = seeds[rng.below(seeds.len())].clone();
    let other = &seeds[rng.below(seeds.len())];
    let steps = 1 + rng.below(6);
    for _ in 0..steps {
        mutate_once(rng, &mut data, other);
    }
    data
}

/// The seed and the budget of a run.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub seed: u64,
    pub budget: Duration,
    /// Iteration cap; `None` when `CALLSMITH_FUZZ_SECS` asked for a timed session.
    pub max_iters: Option<usize>,
}

/// Reads the environment for target `name` with the default iteration cap `iters`.
pub fn settings(name: &str, iters: usize) -> Settings {
    let default_seed = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let seed = match std::env::var("CALLSMITH_FUZZ_SEED") {
        Ok(s) if s.trim() == "random" => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(default_seed),
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CALLSMITH_FUZZ_SEED must be a u64 or `random`: {s:?}")),
        Err(_) => default_seed,
    };
    let (secs, max_iters) = match std::env::var("CALLSMITH_FUZZ_SECS") {
        Ok(s) => (
            s.trim()
                .parse::<f64>()
                .unwrap_or_else(|_| panic!("CALLSMITH_FUZZ_SECS must be a number: {s:?}")),
            None,
        ),
        Err(_) => (DEFAULT_SECS, Some(iters)),
    };
    Settings {
        seed,
        budget: Duration::from_secs_f64(secs.max(0.0)),
        max_iters,
    }
}

/// Reads every file of `dir` (sorted by name) as a seed.
pub fn load_corpus(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("corpus directory {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, b)
        })
        .collect()
}

/// The input as hex (first 4 KiB) and as escaped text.
pub fn describe(input: &[u8]) -> String {
    let shown = &input[..input.len().min(4096)];
    let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
    let text: String = shown.escape_ascii().to_string();
    let more = if input.len() > shown.len() {
        " (first 4096 bytes shown)"
    } else {
        ""
    };
    format!(
        "{} bytes{more}\n  hex:  {hex}\n  text: \"{text}\"",
        input.len()
    )
}

fn save_failure(target: &str, seed: u64, iter: usize, input: &[u8]) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let path = dir.join(format!("{target}-{seed}-{iter}.bin"));
    match std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, input)) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("(not saved: {e})"),
    }
}

thread_local! {
    /// Set while this thread runs fuzz inputs: panics are recorded, not printed.
    static IN_FUZZ: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Where the last panic on this thread happened.
    static LAST_PANIC_AT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Installs (once) a panic hook that keeps fuzzing threads quiet and remembers where each
/// panic happened, so a panic caught by the code under test does not flood the output and
/// one that reaches the harness is reported with its location. Other threads keep the
/// default hook.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_FUZZ.with(|f| f.get()) {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                    .unwrap_or_default();
                LAST_PANIC_AT.with(|p| *p.borrow_mut() = at);
            } else {
                default(info);
            }
        }));
    });
}

/// What a run did.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    pub corpus: usize,
    pub iterations: usize,
    pub elapsed: Duration,
    pub slowest: Duration,
}

/// Fuzzes `check` for target `name`: the corpus in `corpus_dir` plus `extra_seeds` first,
/// then mutations, within the budget of [`settings`]. `check` returns `Err` when an
/// invariant does not hold; a panic or a slow input is a failure as well.
pub fn run(
    name: &str,
    corpus_dir: &Path,
    extra_seeds: Vec<Vec<u8>>,
    iters: usize,
    check: impl Fn(&[u8]) -> Result<(), String>,
) -> Report {
    run_with_mutator(name, corpus_dir, extra_seeds, iters, None, check)
}

/// A structure-aware mutator: a new input from a seed, or `None` to fall back to bytes.
pub type Mutator = fn(&mut Rng, &[u8]) -> Option<Vec<u8>>;

/// [`run`] with a structure-aware `mutator` used for half of the mutated inputs.
pub fn run_with_mutator(
    name: &str,
    corpus_dir: &Path,
    extra_seeds: Vec<Vec<u8>>,
    iters: usize,
    mutator: Option<Mutator>,
    check: impl Fn(&[u8]) -> Result<(), String>,
) -> Report {
    let settings = settings(name, iters);
    install_panic_hook();
    let corpus = load_corpus(corpus_dir);
    assert!(
        !corpus.is_empty(),
        "corpus {} has no seed files",
        corpus_dir.display()
    );
    let mut seeds: Vec<Vec<u8>> = corpus.iter().map(|(_, b)| b.clone()).collect();
    seeds.extend(extra_seeds);
    eprintln!(
        "fuzz {name}: seed {} (CALLSMITH_FUZZ_SEED), budget {:?}, iteration cap {:?}, {} corpus file(s) + {} generated seed(s)",
        settings.seed,
        settings.budget,
        settings.max_iters,
        corpus.len(),
        seeds.len() - corpus.len()
    );

    // Watchdog: an input running for HANG_LIMIT never returned; report it and abort.
    let current: Arc<Mutex<(usize, Vec<u8>)>> = Arc::new(Mutex::new((0, Vec::new())));
    let started_ms = Arc::new(AtomicU64::new(u64::MAX));
    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let watchdog = {
        let (current, started_ms, done) = (current.clone(), started_ms.clone(), done.clone());
        let name = name.to_string();
        let seed = settings.seed;
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let s = started_ms.load(Ordering::Relaxed);
                if s != u64::MAX
                    && t0.elapsed().as_millis() as u64 > s + HANG_LIMIT.as_millis() as u64
                {
                    let (iter, input) = &*current.lock().unwrap_or_else(|e| e.into_inner());
                    let saved = save_failure(&name, seed, *iter, input);
                    eprintln!(
                        "fuzz {name}: HANG (> {HANG_LIMIT:?}) at seed {seed} iteration {iter}\n  saved to {saved}\n  input {}",
                        describe(input)
                    );
                    std::process::abort();
                }
            }
        })
    };

    let mut rng = Rng::new(settings.seed);
    let mut slowest = Duration::ZERO;
    let mut iter = 0usize;
    let mut failure: Option<String> = None;
    loop {
        let input = if iter < seeds.len() {
            seeds[iter].clone()
        } else {
            if t0.elapsed() >= settings.budget
                || settings.max_iters.is_some_and(|m| iter >= seeds.len() + m)
            {
                break;
            }
            let structured = match mutator {
                Some(m) if rng.chance(2) => {
                    let seed = seeds[rng.below(seeds.len())].clone();
                    m(&mut rng, &seed)
                }
                _ => None,
            };
            structured.unwrap_or_else(|| next_input(&mut rng, &seeds))
        };
        {
            let mut c = current.lock().unwrap_or_else(|e| e.into_inner());
            c.0 = iter;
            c.1.clear();
            c.1.extend_from_slice(&input);
        }
        let start = Instant::now();
        started_ms.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        IN_FUZZ.with(|f| f.set(true));
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&input)));
        IN_FUZZ.with(|f| f.set(false));
        started_ms.store(u64::MAX, Ordering::Relaxed);
        let took = start.elapsed();
        slowest = slowest.max(took);
        let problem = match outcome {
            Err(p) => Some(format!(
                "panic at {}: {}",
                LAST_PANIC_AT.with(|p| p.borrow().clone()),
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(non-string payload)".into())
            )),
            Ok(Err(msg)) => Some(format!("invariant: {msg}")),
            Ok(Ok(())) if took > PER_INPUT_LIMIT => {
                Some(format!("slow input: {took:?} > {PER_INPUT_LIMIT:?}"))
            }
            Ok(Ok(())) => None,
        };
        if let Some(problem) = problem {
            let origin = match corpus.get(iter) {
                Some((p, _)) => format!("corpus file {}", p.display()),
                None if iter < seeds.len() => "a generated seed".to_string(),
                None => "a mutation".to_string(),
            };
            let saved = save_failure(name, settings.seed, iter, &input);
            failure = Some(format!(
                "fuzz {name}: {problem}\n  seed {} iteration {iter} ({origin}); rerun with CALLSMITH_FUZZ_SEED={}\n  saved to {saved}\n  input {}",
                settings.seed,
                settings.seed,
                describe(&input)
            ));
            break;
        }
        iter += 1;
    }
    done.store(true, Ordering::Relaxed);
    let _ = watchdog.join();
    if let Some(f) = failure {
        panic!("{f}");
    }
    let report = Report {
        corpus: corpus.len(),
        iterations: iter,
        elapsed: t0.elapsed(),
        slowest,
    };
    eprintln!(
        "fuzz {name}: {} inputs in {:?} (slowest {:?})",
        report.iterations, report.elapsed, report.slowest
    );
    report
}

/// The corpus directory of `target` in the crate that includes this file.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(target)
}
