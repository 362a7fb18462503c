"""Run a program on a real pseudo-terminal, answer its prompt, and print what a person's
terminal would show: the screen of a terminal emulator (pyte) fed every byte the program wrote.

usage: screen.py COLS ROWS MARKER ANSWER -- PROGRAM [ARGS...]
       screen.py COLS ROWS --steps JSON -- PROGRAM [ARGS...]

The program inherits this process's environment and working directory. ANSWER (with `\\n` for
line ends) is typed once MARKER has appeared in the output, or after two quiet seconds. Prints
one JSON object: {"exit": code, "screen": [lines, trailing blanks stripped]}.

With --steps, JSON is a list of [MARKER, ANSWER] pairs typed in order, each once its MARKER has
appeared after where the previous one was found and the program has gone quiet for 0.3 s (a
conversation); "\\u0003" types Ctrl-C, at once. A step
whose marker never appears within 60 seconds ends the script with exit code 3.
"""

import json
import os
import pty
import select
import struct
import sys
import termios
import fcntl
import time

import pyte


def steps() -> int:
    cols, rows, script = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[4])
    if sys.argv[5] != "--":
        print("usage: screen.py COLS ROWS --steps JSON -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    argv = sys.argv[6:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    seen = b""
    searched = 0
    step = 0
    last = time.monotonic()
    deadline = last + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            last = time.monotonic()
        if step < len(script):
            marker, answer = script[step]
            found = seen.find(marker.encode(), searched)
            # Typed once the marker is there and the program has gone quiet (it waits for
            # input, not redrawing); a Ctrl-C is typed while the program works, so at once.
            quiet = time.monotonic() - last >= 0.3 or answer.startswith("\u0003")
            if found >= 0 and quiet:
                searched = found + len(marker.encode())
                os.write(fd, answer.encode())
                step += 1
                deadline = time.monotonic() + 60
    if step < len(script):
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(seen)
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "screen": lines,
                      "steps": step, "raw": seen.decode("utf-8", "replace")}))
    return 0 if step == len(script) else 3


def main() -> int:
    if sys.argv[3] == "--steps":
        return steps()
    cols, rows, marker, answer = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if sys.argv[5] != "--":
        print("usage: screen.py COLS ROWS MARKER ANSWER -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    argv = sys.argv[6:]
    answer = answer.replace("\\n", "\n").encode()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    seen = b""
    answered = False
    last = time.monotonic()
    deadline = last + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            last = time.monotonic()
        if not answered and (marker.encode() in seen or time.monotonic() - last > 2):
            os.write(fd, answer)
            answered = True
    _, status = os.waitpid(pid, 0)
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(seen)
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "screen": lines}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
