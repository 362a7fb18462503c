//! The launcher's network namespace: `unshare(CLONE_NEWNET)` (inside a new user namespace when
//! the process lacks CAP_SYS_ADMIN), loopback brought up over rtnetlink, and for an egress
//! allowlist a forwarder started inside the namespace that bridges 127.0.0.1:PORT to the Unix
//! socket of Warrant's egress proxy outside it. The namespace holds only `lo`, so the proxy is
//! the command's only way out. Limits: the forwarder dies with the command's top process (parent
//! death signal, and a poll because Landlock's signal scope blocks that signal), so background
//! processes left behind lose the proxy.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType, netlink};
use rustix::thread::UnshareFlags;

/// Argument that makes the launcher run as the in-namespace forwarder:
/// `__forward <parent-pid> <unix-socket>`.
pub const FORWARD: &str = "__forward";

/// Enter a new network namespace with loopback up: `CLONE_NEWNET` when the process may (root),
/// else inside a new user namespace mapping only its own ids. Root inside a bare network
/// namespace keeps its capabilities, so what keeps it in is elsewhere: the seccomp filter
/// refuses `setns` and every socket family but AF_UNIX/AF_INET/AF_INET6 (no rtnetlink to move
/// an interface out), and Landlock refuses pidfds and `/proc` of processes outside the sandbox.
/// (A user namespace for root too would need its id map written from the parent namespace.)
pub fn enter() -> Result<(), String> {
    match unshare(UnshareFlags::NEWNET) {
        Ok(()) => {}
        Err(first) => {
            let uid = rustix::process::getuid().as_raw();
            let gid = rustix::process::getgid().as_raw();
            unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNET).map_err(|e| {
                format!("unshare(CLONE_NEWNET) failed ({first}), and with a user namespace ({e})")
            })?;
            std::fs::write("/proc/self/setgroups", "deny")
                .and_then(|()| std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")))
                .and_then(|()| std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")))
                .map_err(|e| format!("cannot map ids in the new user namespace: {e}"))?;
        }
    }
    loopback_up()
}

pub(crate) fn unshare(flags: UnshareFlags) -> std::io::Result<()> {
    // SAFETY: the flags never include CLONE_FILES (the only flag whose unsharing can make a
    // descriptor seen by another thread invalid), and the launcher is single-threaded here.
    #[allow(unsafe_code)]
    let result = unsafe { rustix::thread::unshare_unsafe(flags) };
    result.map_err(std::io::Error::from)
}

/// `ip link set lo up`, as one RTM_NEWLINK request over rtnetlink.
fn loopback_up() -> Result<(), String> {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const NLMSG_ERROR: u16 = 2;
    const IFF_UP: u32 = 1;
    let probe = rustix::net::socket(AddressFamily::UNIX, SocketType::DGRAM, None)
        .map_err(|e| format!("socket for SIOCGIFINDEX: {e}"))?;
    let index = rustix::net::netdevice::name_to_index(&probe, "lo")
        .map_err(|e| format!("no loopback interface in the new namespace: {e}"))?;
    let fd = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)
        .map_err(|e| format!("rtnetlink socket: {e}"))?;
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes());
    msg.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    msg.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    msg.extend_from_slice(&[0, 0]); // family AF_UNSPEC, padding
    msg.extend_from_slice(&0u16.to_ne_bytes()); // device type
    msg.extend_from_slice(&index.to_ne_bytes());
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // flags
    msg.extend_from_slice(&IFF_UP.to_ne_bytes()); // change mask
    rustix::net::sendto(
        &fd,
        &msg,
        SendFlags::empty(),
        &netlink::SocketAddrNetlink::new(0, 0),
    )
    .map_err(|e| format!("rtnetlink send: {e}"))?;
    let mut buf = [0u8; 256];
    let (n, _) = rustix::net::recv(&fd, &mut buf, RecvFlags::empty())
        .map_err(|e| format!("rtnetlink receive: {e}"))?;
    let kind = buf.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let code = buf
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (n >= 20, kind, code) {
        (true, Some(NLMSG_ERROR), Some(0)) => Ok(()),
        (true, Some(NLMSG_ERROR), Some(errno)) => Err(format!(
            "bringing lo up failed: {}",
            std::io::Error::from_raw_os_error(-errno)
        )),
        _ => Err("unexpected rtnetlink answer while bringing lo up".to_owned()),
    }
}

/// How often the forwarder checks that the command it serves is still running.
const PARENT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// The launcher's own file, opened before a view made its path unreachable.
static LAUNCHER: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

/// Keep the launcher's file open for [`start_forwarder`] (in the view, its path is not there).
pub fn keep_launcher(exe: std::fs::File) {
    let _ = LAUNCHER.set(exe);
}

/// Start the forwarder (this same program, `prefix… __forward <pid> <socket>`) inside the
/// current namespace; returns the loopback port it listens on.
pub fn start_forwarder(prefix: &[String], socket: &Path) -> Result<u16, String> {
    use std::os::fd::AsRawFd;
    // Executed through its descriptor (an ELF file, so close-on-exec does not stop it).
    let exe = match LAUNCHER.get() {
        Some(file) => std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd())),
        None => std::env::current_exe().map_err(|e| format!("cannot locate the launcher: {e}"))?,
    };
    let mut child = Command::new(exe)
        .args(prefix)
        .arg(FORWARD)
        .arg(std::process::id().to_string())
        .arg(socket)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the egress forwarder: {e}"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| "the egress forwarder has no stdout".to_owned())?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("cannot read the egress forwarder's port: {e}"))?;
    line.trim()
        .parse::<u16>()
        .map_err(|_| format!("the egress forwarder did not start: `{}`", line.trim()))
}

/// The forwarder's main: `args` is `<parent-pid> <socket>`.
pub fn forwarder_main(args: &[String]) -> i32 {
    let (Some(parent), Some(socket)) = (args.first(), args.get(1)) else {
        return 2;
    };
    // Die with the launcher (which becomes the command): nothing outlives the call. The
    // parent-death signal alone is not enough: once the command is under Landlock's signal
    // scope, the kernel refuses the signal its exit would send to us (we are outside its
    // domain). So a watcher also polls for the parent to change.
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .is_err()
    {
        return 3;
    }
    let ppid = || rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    let Some(expected) = parent.parse::<i32>().ok().filter(|p| *p == ppid()) else {
        return 4;
    };
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(PARENT_POLL);
            if ppid() != expected {
                std::process::exit(0);
            }
        }
    });
    let Ok(listener) = TcpListener::bind("127.0.0.1:0") else {
        return 5;
    };
    let Ok(addr) = listener.local_addr() else {
        return 5;
    };
    let mut out = std::io::stdout();
    if writeln!(out, "{}", addr.port())
        .and_then(|()| out.flush())
        .is_err()
    {
        return 6;
    }
    for conn in listener.incoming() {
        let Ok(tcp) = conn else { continue };
        let socket = socket.clone();
        std::thread::spawn(move || {
            if let Ok(unix) = UnixStream::connect(&socket) {
                bridge(tcp, unix);
            }
        });
    }
    0
}

/// Copy both ways until each side has closed.
fn bridge(tcp: TcpStream, unix: UnixStream) {
    let (Ok(tcp2), Ok(unix2)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        copy(tcp2, &unix2);
        let _ = unix2.shutdown(Shutdown::Write);
    });
    copy(unix, &tcp);
    let _ = tcp.shutdown(Shutdown::Write);
    let _ = up.join();
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
