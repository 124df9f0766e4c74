//! Link settings of the reference component.
//!
//! Its linear memory starts at 2 MiB (32 pages) instead of what the linker
//! sizes (23: the 1 MiB stack and the data): a typical call's heap fits, so
//! it grows no memory, and each growth costs the host a system call to open
//! the pages (the pooled slot is reset to the initial size after every
//! call). Untouched pages cost nothing: they are mapped on first write.
fn main() {
    println!("cargo:rustc-link-arg-cdylib=--initial-memory=2097152");
}
