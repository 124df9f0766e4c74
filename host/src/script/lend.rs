//! Lending a script's inner-call handler to its link for the length of
//! one call, so that inner calls run on the script's own thread.
//!
//! The engine's store holds the call's [`ScriptLink`], which must be
//! `'static`; the handler borrows the host, the session and the catalog for
//! the length of the script's call only. [`Lent`] bridges the two: it hands
//! the link a pointer to the handler and takes it back when it is dropped,
//! waiting for a call in progress to end first. A link used after that
//! (a store kept past its call) answers every call `plugin_unavailable`.
//!
//! An inner call made inline nests its sandbox below the script's on the
//! native stack. It runs inline only when the thread has [`INLINE_ROOM`]
//! left; otherwise that request runs on a new thread of
//! [`CALL_THREAD_STACK`] bytes.

use std::sync::{Arc, RwLock};

use crate::sandbox::ScriptLink;

/// Inner calls: `(tool name, arguments)` in, one answer each out, in order.
pub(super) type Handler<'a> =
    dyn Fn(Vec<(String, String)>) -> Vec<Result<String, String>> + Sync + 'a;

/// Native stack an inner call needs below the script's: a guest's whole
/// Wasm stack (`max_wasm_stack`, 1 MiB) and the host's frames around it,
/// with room to spare for unoptimised builds.
pub const INLINE_ROOM: usize = 2 << 20;

/// Native stack of a thread that runs calls: a script's engine (at most
/// 1 MiB of Wasm stack) with an inner call nested below it fits with room
/// to spare. Servers give their call threads this much; untouched stack
/// costs address space only.
pub const CALL_THREAD_STACK: usize = 8 << 20;

/// The handler, erased to `'static` while [`Lent`] holds it.
struct Ptr(*const Handler<'static>);

// SAFETY: the pointee is `Sync`, and [`Lent`] keeps it alive while any
// thread may read the pointer (see [`Lent::drop`]).
unsafe impl Send for Ptr {}
unsafe impl Sync for Ptr {}

/// A handler lent to links until this is dropped.
pub(super) struct Lent<'a> {
    slot: Arc<RwLock<Option<Ptr>>>,
    _handler: std::marker::PhantomData<&'a Handler<'a>>,
}

impl<'a> Lent<'a> {
    pub fn new(handler: &'a Handler<'a>) -> Self {
        let ptr: *const Handler<'a> = handler;
        // SAFETY: only the lifetime is erased; the pointer is read only
        // under the slot's read lock, and `drop` clears it under the write
        // lock before `'a` can end.
        let ptr: *const Handler<'static> = unsafe { std::mem::transmute(ptr) };
        Lent {
            slot: Arc::new(RwLock::new(Some(Ptr(ptr)))),
            _handler: std::marker::PhantomData,
        }
    }

    /// A link whose calls go to the handler while it is lent, and are
    /// refused with `over` after.
    pub fn link(&self, over: fn(usize) -> Vec<Result<String, String>>) -> ScriptLink {
        let slot = self.slot.clone();
        ScriptLink::new(move |calls| {
            let lent = slot.read().unwrap_or_else(|e| e.into_inner());
            let Some(Ptr(ptr)) = lent.as_ref() else {
                return over(calls.len());
            };
            // SAFETY: the read lock is held, so `Lent` is not dropped yet
            // and the handler it borrows is alive.
            let handler: &Handler<'static> = unsafe { &**ptr };
            if stack_room().is_some_and(|room| room >= INLINE_ROOM) {
                return handler(calls);
            }
            let n = calls.len();
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name("toolhost-script".into())
                    .stack_size(CALL_THREAD_STACK)
                    .spawn_scoped(s, || handler(calls))
                    .ok()
                    .and_then(|t| t.join().ok())
            })
            .unwrap_or_else(|| over(n))
        })
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        // Waits for a call in progress on another thread, then no link
        // reaches the handler again.
        *self.slot.write().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Bytes of native stack left below this frame on this thread, if the
/// thread's stack can be read.
pub fn stack_room() -> Option<usize> {
    thread_local! {
        /// The lowest address of this thread's stack (0: not read yet).
        static LOW: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }
    let low = LOW.with(|low| {
        if low.get() == 0 {
            low.set(stack_low().unwrap_or(usize::MAX));
        }
        low.get()
    });
    let here = std::ptr::addr_of!(low) as usize;
    here.checked_sub(low)
}

/// The lowest address of the current thread's stack.
fn stack_low() -> Option<usize> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before it is
    // read and destroyed once; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let r = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (r == 0 && !addr.is_null()).then_some(addr as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_knows_its_stack_room() {
        let small = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(stack_room)
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(small > 0 && small < 256 << 10, "{small}");
        let big = std::thread::Builder::new()
            .stack_size(CALL_THREAD_STACK)
            .spawn(stack_room)
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert!(big > INLINE_ROOM && big <= CALL_THREAD_STACK, "{big}");
    }

    #[test]
    fn a_link_calls_the_handler_while_lent_and_refuses_after() {
        let seen = std::sync::Mutex::new(Vec::new());
        let handler = |calls: Vec<(String, String)>| {
            seen.lock()
                .unwrap()
                .extend(calls.iter().map(|c| c.0.clone()));
            calls.into_iter().map(|c| Ok(c.1)).collect()
        };
        let lent = Lent::new(&handler);
        let over = |n: usize| vec![Err("over".to_string()); n];
        let link = lent.link(over);
        assert_eq!(link.call("a", "1"), Ok("1".to_string()));
        // From a thread with little stack: the call moves to a new thread.
        let far = link.clone();
        let answer = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || far.call("b", "2"))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(answer, Ok("2".to_string()));
        drop(lent);
        assert_eq!(link.call("c", "3"), Err("over".to_string()));
        assert_eq!(*seen.lock().unwrap(), ["a", "b"]);
    }
}
