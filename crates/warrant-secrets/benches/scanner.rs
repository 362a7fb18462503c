//! Start-up and scan cost of the scanner: building it (parsing and translating gitleaks' 222
//! rules; no pattern is compiled yet), the first scan of a text (which compiles only the rules
//! whose keywords occur in it), and later scans (everything compiled).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_debug_implementations
)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use warrant_secrets::{DEFAULT_RULES, Redactor, RuleGroup, RuleSet, Scanner};

fn sample() -> String {
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!(
            "line {i}: fn handler(req: Request) -> Response {{ let user = req.user(); log::info!(\"served {{}}\", user); }}\n"
        ));
    }
    text.push_str("export GITHUB_TOKEN=ghp_4Jx9ZkQ2mW7rT1vB8nL3cY6pH0sD5fG2aE9u\n");
    text.push_str("aws_secret_access_key = \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ2mW7rT1v\"\n");
    text
}

fn fresh() -> Scanner {
    Scanner::from_groups(vec![RuleGroup {
        set: RuleSet::parse(DEFAULT_RULES).unwrap(),
        eager: false,
    }])
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let text = sample();
    c.bench_function("startup: parse + translate the default rules (cold)", |b| {
        b.iter(|| black_box(fresh()))
    });
    c.bench_function(
        "startup: Redactor::new over the process's default scanner",
        |b| b.iter(|| black_box(Redactor::new(Scanner::default_rules(), Vec::new()))),
    );
    c.bench_function("first scan of 20 KB (compiles the rules it needs)", |b| {
        b.iter_batched(fresh, |s| black_box(s.scan(&text)), BatchSize::SmallInput)
    });
    let warm = Scanner::default_rules();
    let _ = warm.scan(&text);
    c.bench_function("scan of 20 KB, rules compiled", |b| {
        b.iter(|| black_box(warm.scan(&text)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
