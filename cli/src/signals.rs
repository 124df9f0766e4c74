//! SIGTERM and SIGINT for `toolhost serve`.
//!
//! [`install`] blocks both signals in the calling thread before any other
//! thread starts (threads inherit the mask, so no thread takes the default
//! action of dying), and one thread waits for them with `sigwait`: the
//! first asks the server to stop ([`Shutdown::request`]: it refuses new
//! work, lets running calls finish and returns, and the process exits 0);
//! the second ends the process at once, with the conventional 128 + signal
//! number.

use std::sync::Arc;

use toolhost_mcp::Shutdown;

/// Blocks SIGTERM and SIGINT in this thread (and so in every thread it
/// starts after) and starts the thread that answers them. Call it first
/// thing, before any other thread exists.
pub fn install(shutdown: Arc<Shutdown>) -> std::io::Result<()> {
    let set = signal_set();
    // SAFETY: `set` is an initialised signal set; a null old-set pointer
    // is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    std::thread::Builder::new()
        .name("toolhost-signals".into())
        .spawn(move || {
            let mut first = true;
            loop {
                let mut signal = 0;
                // SAFETY: `set` is initialised and `signal` is writable.
                if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
                    continue;
                }
                if first {
                    first = false;
                    tracing::info!(
                        "toolhost: signal {signal}: stopping once running calls end (again to stop now)"
                    );
                    shutdown.request();
                } else {
                    std::process::exit(128 + signal);
                }
            }
        })?;
    Ok(())
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset reads it;
    // both only write to the set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}
