#!/usr/bin/env python3
"""A scripted transcript of CALLS turns of one `write_file` each, then an answer: the run the
worker benchmarks (`bench-workers.sh`, `bench-workers-ab.sh`) queue. Usage: calls-transcript.py CALLS"""
import sys

calls = int(sys.argv[1])
print("version: 1\nturns:")
for k in range(calls):
    print(f"  - calls:\n      - tool: write_file\n        args: {{ path: out/f{k}.txt, content: \"{k}\\n\" }}")
print("  - say: done")
