#!/usr/bin/env python3
"""Where one governed call's time goes, from `strace` timestamps (few traced calls, so little
overhead): for each command line given (a `warrant run` whose transcript makes one
`run_command /bin/true` call), ROUNDS runs under
`strace -f -ttt -e trace=execve,fsync,fdatasync,exit_group --seccomp-bpf`, the commands
interleaved round by round, and the median of each segment:

  batch -> launcher   the first batch committed (the last fsync before the launcher's execve)
                      to the launcher's execve (plan, layer, pipes, spawn)
  launcher -> view    the launcher's execve to the view's first process's execve (the launcher
                      binary's start, the namespaces, the clone into the PID namespace)
  view -> target      that process's execve to /bin/true's (the view's mounts, the walk of the
                      workspace, network namespace, Landlock, seccomp)
  target -> launcher exit   /bin/true's exit_group to the launcher's (the namespace teardown)
  launcher exit -> completion   the launcher's exit to the next fsync (changeset, layer, sealing)

Usage: governed-segments.py ROUNDS OUT 'name=command line' ...
"""
import os, re, shlex, statistics, subprocess, sys, tempfile

LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def segments(trace):
    events = []
    for raw in open(trace):
        m = LINE.match(raw)
        if m:
            events.append((int(m.group(1)), float(m.group(2)) * 1e3, m.group(3)))
    launcher = view = target = None
    for pid, t, rest in events:
        if not rest.startswith("execve("):
            continue
        if "__build-id" in rest:
            continue
        if "__view-init" in rest:
            view = view or (pid, t)
        elif rest.startswith('execve("/bin/true"') or rest.startswith('execve("/usr/bin/true"'):
            target = target or (pid, t)
        elif "__sandbox" in rest or re.match(r'execve\("[^"]*/warrant-sandbox"', rest):
            launcher = launcher or (pid, t)
    if not (launcher and view and target):
        raise SystemExit(f"{trace}: no launcher, view or target execve found")
    children = {launcher[0], view[0], target[0]}
    exits = {pid: t for pid, t, rest in events if rest.startswith("exit_group(")}
    syncs = [t for pid, t, rest in events
             if pid not in children and re.match(r"f(data)?sync\(", rest)]
    batch = max(t for t in syncs if t < launcher[1])
    launcher_exit = exits[launcher[0]]
    completion = min(t for t in syncs if t > launcher_exit)
    return {
        "batch -> launcher": launcher[1] - batch,
        "launcher -> view": view[1] - launcher[1],
        "view -> target": target[1] - view[1],
        "target -> launcher exit": launcher_exit - exits[target[0]],
        "launcher exit -> completion": completion - launcher_exit,
        "batch -> completion": completion - batch,
    }


def main():
    rounds, out = int(sys.argv[1]), sys.argv[2]
    cmds = [(spec.split("=", 1)[0], shlex.split(spec.split("=", 1)[1])) for spec in sys.argv[3:]]
    samples = {name: [] for name, _ in cmds}
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace")
        for r in range(rounds + 1):
            for name, argv in cmds[r % len(cmds):] + cmds[:r % len(cmds)]:
                subprocess.run(["strace", "-f", "-ttt", "-qq", "--seccomp-bpf", "-o", trace,
                                "-e", "trace=execve,fsync,fdatasync,exit_group", *argv],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                if r > 0:  # the first round warms up
                    samples[name].append(segments(trace))
    keys = list(next(iter(samples.values()))[0])
    with open(os.path.join(out, "segments.md"), "w") as f:
        head = "| segment (median ms, %d runs each) | %s |" % (rounds, " | ".join(n for n, _ in cmds))
        lines = [head, "|---" * (len(cmds) + 1) + "|"]
        for k in keys:
            lines.append(f"| {k} | " + " | ".join(
                f"{statistics.median(s[k] for s in samples[n]):.2f}" for n, _ in cmds) + " |")
        f.write("\n".join(lines) + "\n")
    print(open(os.path.join(out, "segments.md")).read(), end="")
    print(f"segments: load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
