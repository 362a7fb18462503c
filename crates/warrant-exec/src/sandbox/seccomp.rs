//! The seccomp filter of the launcher: the syscall numbers it names per architecture, and the
//! one filter that refuses (EPERM) reaching into other processes, io_uring, typing into the
//! terminal and, off the host network, sockets of families outside a list.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

#[cfg(target_arch = "x86_64")]
mod nr {
    pub const IOCTL: i64 = 16;
    pub const SOCKET: i64 = 41;
    pub const SOCKETPAIR: i64 = 53;
    pub const PTRACE: i64 = 101;
    pub const SETNS: i64 = 308;
    pub const PROCESS_VM_READV: i64 = 310;
    pub const PROCESS_VM_WRITEV: i64 = 311;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const IOCTL: i64 = 29;
    pub const SOCKET: i64 = 198;
    pub const SOCKETPAIR: i64 = 199;
    pub const PTRACE: i64 = 117;
    pub const SETNS: i64 = 268;
    pub const PROCESS_VM_READV: i64 = 270;
    pub const PROCESS_VM_WRITEV: i64 = 271;
}
const IO_URING_SETUP: i64 = 425;
const IO_URING_ENTER: i64 = 426;
const IO_URING_REGISTER: i64 = 427;
const PIDFD_GETFD: i64 = 438;
/// ioctl requests that push input into a terminal, or act on its console, as if typed there.
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;
pub(super) const AF_UNIX: u64 = 1;
pub(super) const AF_INET: u64 = 2;
pub(super) const AF_INET6: u64 = 10;
const EPERM: u32 = 1;

/// `families`: the socket families a command may open; `None` for any (the host network). An
/// allowlist inside a namespace gets AF_UNIX and IP (to reach the forwarder), never netlink or
/// packet sockets (with which root could reconfigure or move interfaces).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(super) fn apply_seccomp(families: Option<&[u64]>) -> Result<(), String> {
    let err = |e: seccompiler::BackendError| format!("seccomp filter: {e}");
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // Reaching into another process (Warrant's memory or descriptors), and io_uring, which
    // bypasses syscall filtering.
    // `setns`: joining another namespace (the host's network, through a pidfd) is never needed.
    for nr in [
        nr::PTRACE,
        nr::SETNS,
        nr::PROCESS_VM_READV,
        nr::PROCESS_VM_WRITEV,
        PIDFD_GETFD,
        IO_URING_SETUP,
        IO_URING_ENTER,
        IO_URING_REGISTER,
    ] {
        rules.insert(nr, Vec::new());
    }
    // Typing into the person's terminal (where an approval prompt may be waiting).
    let ioctl = |request: u64| -> Result<SeccompRule, String> {
        SeccompRule::new(vec![
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
                .map_err(err)?,
        ])
        .map_err(err)
    };
    rules.insert(nr::IOCTL, vec![ioctl(TIOCSTI)?, ioctl(TIOCLINUX)?]);
    if let Some(families) = families {
        for nr in [nr::SOCKET, nr::SOCKETPAIR] {
            // One rule whose conditions all hold (a family outside the list) means EPERM.
            let outside = families
                .iter()
                .map(|f| {
                    SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, *f)
                        .map_err(err)
                })
                .collect::<Result<Vec<_>, _>>()?;
            rules.insert(nr, vec![SeccompRule::new(outside).map_err(err)?]);
        }
    }
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(EPERM),
        arch,
    )
    .map_err(err)?;
    let program: BpfProgram = filter.try_into().map_err(err)?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp filter: {e}"))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(super) fn apply_seccomp(_families: Option<&[u64]>) -> Result<(), String> {
    Err("no seccomp filter is built for this architecture".to_owned())
}
