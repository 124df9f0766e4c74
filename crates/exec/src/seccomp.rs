//! The seccomp filter every sandboxed program runs under, handed to
//! bubblewrap (`--seccomp FD`) as a classic-BPF program.
//!
//! It refuses the creation of symbolic links (`symlink`, `symlinkat`) with
//! `EPERM`: a link a program leaves in a writable mount outlives the run
//! and points anywhere (`/etc/passwd`, the user's home), and other tools
//! that read the workspace may follow it. Everything else is allowed; the
//! sandbox's namespaces and mounts remain the real boundary.
//!
//! Hard links (`link`, `linkat`) stay allowed: they cannot cross mounts
//! (`EXDEV`), so a program can only give another name to a file it may
//! already write in the same mount, and build tools use them.
//!
//! The filter first checks the calling convention (`AUDIT_ARCH_*`): a
//! system call made through another one (32-bit `int 0x80` on x86_64, or
//! the x32 ABI, whose numbers carry bit 30) would have other numbers, so it
//! kills the process instead of guessing. On an architecture without a
//! filter here, programs cannot run at all.

/// One classic-BPF instruction (`struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD (0) | BPF_W (0) | BPF_ABS
const JEQ_K: u16 = 0x05 | 0x10; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x05 | 0x30; // BPF_JMP | BPF_JGE | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// Offsets in `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;

/// The calling convention this host's programs use, and the system calls
/// refused under it.
#[cfg(target_arch = "x86_64")]
const ARCH: Option<(u32, &[u32])> = Some((
    0xc000_003e, // AUDIT_ARCH_X86_64
    &[88, 266],  // symlink, symlinkat
));
#[cfg(target_arch = "aarch64")]
const ARCH: Option<(u32, &[u32])> = Some((
    0xc000_00b7, // AUDIT_ARCH_AARCH64
    &[36],       // symlinkat (there is no symlink)
));
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARCH: Option<(u32, &[u32])> = None;

/// The x32 ABI's bit in system-call numbers (x86_64); no native number
/// reaches it.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn program(arch: u32, refused: &[u32]) -> Vec<Insn> {
    let n = refused.len();
    // Layout: 0 load arch, 1 arch?, 2 load nr, 3 x32?, 4.. refused?,
    // then allow, errno, kill.
    let allow = 4 + n;
    let errno = allow + 1;
    let kill = errno + 1;
    let jump = |from: usize, to: usize| u8::try_from(to - from - 1).expect("short program");
    let mut p = vec![
        Insn {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: ARCH_OFFSET,
        },
        Insn {
            code: JEQ_K,
            jt: 0,
            jf: jump(1, kill),
            k: arch,
        },
        Insn {
            code: LD_W_ABS,
            jt: 0,
            jf: 0,
            k: NR_OFFSET,
        },
        Insn {
            code: JGE_K,
            jt: jump(3, kill),
            jf: 0,
            k: X32_SYSCALL_BIT,
        },
    ];
    for (i, &nr) in refused.iter().enumerate() {
        p.push(Insn {
            code: JEQ_K,
            jt: jump(4 + i, errno),
            jf: 0,
            k: nr,
        });
    }
    p.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: RET_ALLOW,
    });
    p.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: RET_ERRNO | libc::EPERM as u32,
    });
    p.push(Insn {
        code: RET_K,
        jt: 0,
        jf: 0,
        k: RET_KILL_PROCESS,
    });
    p
}

fn bytes(p: &[Insn]) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len() * 8);
    for i in p {
        out.extend_from_slice(&i.code.to_ne_bytes());
        out.push(i.jt);
        out.push(i.jf);
        out.extend_from_slice(&i.k.to_ne_bytes());
    }
    out
}

/// The filter as bubblewrap reads it (an array of `struct sock_filter`), or
/// `None` on an architecture this module has no numbers for.
pub(super) fn filter() -> Option<Vec<u8>> {
    ARCH.map(|(arch, refused)| bytes(&program(arch, refused)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on one `seccomp_data` (nr, arch), as the kernel
    /// would: the few instructions it uses.
    fn run(p: &[Insn], nr: u32, arch: u32) -> u32 {
        let mut pc = 0;
        let mut acc = 0u32;
        loop {
            let i = p[pc];
            pc += 1;
            match i.code {
                LD_W_ABS if i.k == NR_OFFSET => acc = nr,
                LD_W_ABS if i.k == ARCH_OFFSET => acc = arch,
                JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                JGE_K => pc += usize::from(if acc >= i.k { i.jt } else { i.jf }),
                RET_K => return i.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn symlinks_are_refused_and_foreign_conventions_killed() {
        const X86_64: u32 = 0xc000_003e;
        let p = program(X86_64, &[88, 266]);
        let eperm = RET_ERRNO | libc::EPERM as u32;
        assert_eq!(run(&p, 88, X86_64), eperm);
        assert_eq!(run(&p, 266, X86_64), eperm);
        for allowed in [0, 1, 2, 86, 87, 265, 267, 89] {
            assert_eq!(run(&p, allowed, X86_64), RET_ALLOW, "{allowed}");
        }
        // x32: symlink is 88 | bit 30, and nothing under bit 30 is allowed.
        assert_eq!(run(&p, 88 | X32_SYSCALL_BIT, X86_64), RET_KILL_PROCESS);
        assert_eq!(run(&p, X32_SYSCALL_BIT, X86_64), RET_KILL_PROCESS);
        // i386 (`int 0x80`: symlink is 83 there) and any other convention.
        for arch in [0x4000_0003, 0xc000_00b7, 0] {
            assert_eq!(run(&p, 83, arch), RET_KILL_PROCESS);
        }
        // bubblewrap reads whole 8-byte instructions.
        assert_eq!(bytes(&p).len(), p.len() * 8);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(filter().unwrap(), bytes(&p));
        }
    }
}
