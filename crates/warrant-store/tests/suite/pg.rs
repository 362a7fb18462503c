//! The fallback PostgreSQL server and URL handling of the test kit, checked here.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use warrant_testkit::pg::{TestDb, Throwaway, with_dbname};

/// The fallback path, run by hand (`cargo test -p warrant-store -- --ignored`): a throwaway
/// server starts, serves a store, and is gone after.
#[test]
#[ignore = "starts its own PostgreSQL server; run with --ignored to check the fallback"]
fn throwaway_server_starts_serves_and_stops() {
    let server = Throwaway::start().unwrap();
    eprintln!("started {} in {}", server.url, server.dir.display());
    {
        let db = TestDb::on(&server.url);
        super::conformance::basics(&super::conformance::PgBackend::on(db));
    }
    let dir = server.dir.clone();
    drop(server);
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn database_names_are_replaced_in_urls() {
    assert_eq!(
        [
            with_dbname("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            with_dbname("postgres://u:p@h/db?sslmode=disable", "t1"),
            with_dbname("postgres://h:5", "t1"),
        ],
        [
            "postgres://postgres@127.0.0.1:5432/t1".to_owned(),
            "postgres://u:p@h/t1?sslmode=disable".to_owned(),
            "postgres://h:5/t1".to_owned(),
        ]
    );
}

/// The pool: while one call waits inside its transaction (here, for its audit partition's head
/// row, locked by another session), another call of the same process goes through on a second
/// connection instead of queueing behind it; the second connection is opened only then.
#[test]
fn a_call_waiting_in_a_transaction_does_not_hold_up_the_process_s_other_calls() {
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;
    use warrant_store::{Append, AuditOutbox as _, EventStore, PostgresStore};

    use super::conformance::{ToySealer, clock, draft};

    let db = TestDb::new();
    let store = Arc::new(PostgresStore::connect(&db.url, clock()).unwrap());
    let run = super::conformance::started_run(&*store, "run-9001");
    assert_eq!(store.open_connections(), 1);

    let mut holder = db.client();
    let mut held = holder.transaction().unwrap();
    let part = warrant_store::partition_of(run.as_str(), store.audit_partitions().unwrap()) as i64;
    held.execute(
        "SELECT seq FROM audit_partitions WHERE part = $1 FOR UPDATE",
        &[&part],
    )
    .unwrap();

    let (appended_tx, appended) = mpsc::channel();
    let appender = {
        let store = store.clone();
        let run = run.clone();
        std::thread::spawn(move || {
            let out = store.append(
                Append {
                    run,
                    expected_seq: 2,
                    events: vec![draft("step")],
                    status: None,
                    requests: vec![],
                    fence: None,
                },
                &ToySealer,
            );
            let _ = appended_tx.send(out.map(|e| e.len()));
        })
    };
    // The append is now waiting for the lock, inside its transaction, on the first connection.
    let waiting = db
        .client()
        .query_one("SELECT count(*) FROM pg_locks WHERE NOT granted", &[])
        .map(|r| r.get::<_, i64>(0));
    let mut waited = 0;
    let mut seen = waiting.unwrap_or(0);
    while seen == 0 && waited < 300 {
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
        seen = db
            .client()
            .query_one("SELECT count(*) FROM pg_locks WHERE NOT granted", &[])
            .map(|r| r.get::<_, i64>(0))
            .unwrap_or(0);
    }
    assert_eq!(
        seen, 1,
        "the append never started waiting for its partition's head row"
    );

    // Another call of the same process: answered while the append still waits.
    let (listed_tx, listed) = mpsc::channel();
    {
        let store = store.clone();
        std::thread::spawn(move || {
            let _ = listed_tx.send(store.runs().map(|r| r.len()));
        });
    }
    let runs = listed.recv_timeout(Duration::from_secs(60)).expect(
        "runs() queued behind the waiting append: the pool did not hand out a second connection",
    );
    assert_eq!(runs.unwrap(), 1);
    assert!(
        appended.try_recv().is_err(),
        "the append finished although the chain lock was still held"
    );
    assert_eq!(store.open_connections(), 2);

    held.rollback().unwrap();
    assert_eq!(
        appended
            .recv_timeout(Duration::from_secs(60))
            .unwrap()
            .unwrap(),
        1
    );
    appender.join().unwrap();
    assert_eq!(store.events(&run).unwrap().len(), 2);
}

/// A TCP proxy in front of the server that can cut every connection it carries, as a network
/// partition or a load balancer's idle timeout would.
struct CuttingProxy {
    port: u16,
    live: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl CuttingProxy {
    fn to(upstream: std::net::SocketAddr) -> Self {
        use std::net::{Shutdown, TcpListener, TcpStream};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let live = std::sync::Arc::new(std::sync::Mutex::new(Vec::<TcpStream>::new()));
        let kept = live.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let mut list = kept.lock().unwrap();
                list.push(client.try_clone().unwrap());
                list.push(server.try_clone().unwrap());
                drop(list);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Self { port, live }
    }

    fn cut(&self) {
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// A connection cut between two calls (the server never saw the second): the next call
/// reconnects and goes through, once; nothing is lost or written twice.
#[test]
fn a_connection_cut_by_the_network_is_reopened_and_nothing_is_lost_or_doubled() {
    use warrant_store::{Append, AuditOutbox, EventStore, PostgresStore};

    use super::conformance::{ToySealer, clock, draft};

    let db = TestDb::new();
    let target: postgres::Config = db.url.parse().unwrap();
    let upstream = match (target.get_hosts().first(), target.get_ports().first()) {
        (Some(postgres::config::Host::Tcp(h)), Some(p)) => format!("{h}:{p}"),
        other => panic!("the test database is not on TCP: {other:?}"),
    };
    let proxy = CuttingProxy::to(upstream.parse().unwrap());
    let via = db
        .url
        .replacen(&upstream, &format!("127.0.0.1:{}", proxy.port), 1);
    let store = PostgresStore::connect(&via, clock()).unwrap();
    // One chain, positioned as appended: its head counts the records (see conformance).
    store.set_audit_partitions(1).unwrap();
    let run = super::conformance::started_run(&store, "run-c07");
    for (i, seq) in [(0, 2u64), (1, 3)] {
        proxy.cut();
        let appended = store.append(
            Append {
                run: run.clone(),
                expected_seq: seq,
                events: vec![draft(&format!("step{i}"))],
                status: None,
                requests: vec![],
                fence: None,
            },
            &ToySealer,
        );
        assert_eq!(appended.map(|e| e.len()).map_err(|e| e.to_string()), Ok(1));
    }
    // A read after a cut is read again on a new connection.
    proxy.cut();
    let kinds: Vec<String> = store
        .events(&run)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["run_started", "step0", "step1"]);
    assert_eq!(store.audit_head().unwrap().seq, 3);
}

/// The server restarts between two appends (a failover, an upgrade): the next append waits
/// for it, reconnects and goes through once; the chain is whole.
#[test]
fn a_server_restart_between_appends_loses_and_doubles_nothing() {
    use warrant_store::{Append, AuditOutbox, EventStore, PostgresStore};

    use super::conformance::{ToySealer, clock, draft};

    let server = Throwaway::start().unwrap();
    let db = TestDb::on(&server.url);
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    // One chain, positioned as appended: its head counts the records (see conformance).
    store.set_audit_partitions(1).unwrap();
    let run = super::conformance::started_run(&store, "run-7e57a7");
    server.restart().unwrap();
    let appended = store.append(
        Append {
            run: run.clone(),
            expected_seq: 2,
            events: vec![draft("after_restart")],
            status: None,
            requests: vec![],
            fence: None,
        },
        &ToySealer,
    );
    assert_eq!(appended.map(|e| e.len()).map_err(|e| e.to_string()), Ok(1));
    assert_eq!(store.events(&run).unwrap().len(), 2);
    assert_eq!(store.audit_head().unwrap().seq, 2);
}

/// An append's writes are sent with its `COMMIT`, in one round trip: when one of them fails
/// there, the whole transaction is rolled back (no event, no audit record, the run's row and
/// the chain's head as they were), the append reports the server's refusal, and the next
/// append on the same connection goes through.
#[test]
fn a_write_failing_with_the_commit_leaves_nothing_and_the_next_append_goes_through() {
    use warrant_store::{Append, AuditOutbox, EventStore, PostgresStore, StoredEvent};

    use super::conformance::{ToySealer, clock, draft};

    let db = TestDb::new();
    let store = PostgresStore::connect(&db.url, clock()).unwrap();
    // One chain, positioned as appended: its head counts the records (see conformance).
    store.set_audit_partitions(1).unwrap();
    let run = super::conformance::started_run(&store, "run-b00");
    db.client()
        .batch_execute("ALTER TABLE events ADD CONSTRAINT no_boom CHECK (kind <> 'boom')")
        .unwrap();
    let append = |kinds: &[&str]| {
        store.append(
            Append {
                run: run.clone(),
                expected_seq: 2,
                events: kinds.iter().map(|k| draft(k)).collect(),
                status: None,
                requests: vec![],
                fence: None,
            },
            &ToySealer,
        )
    };
    let kinds = |events: Vec<StoredEvent>| events.into_iter().map(|e| e.kind).collect::<Vec<_>>();

    let refused = append(&["fine", "boom"]).unwrap_err().to_string();
    assert!(refused.contains("no_boom"), "{refused}");
    assert_eq!(
        (
            kinds(store.events(&run).unwrap()),
            store.audit_head().unwrap().seq,
            store.run(&run).unwrap().map(|r| r.events),
        ),
        (vec!["run_started".to_owned()], 1, Some(1))
    );

    assert_eq!(kinds(append(&["fine"]).unwrap()), ["fine"]);
    assert_eq!(
        (
            kinds(store.events(&run).unwrap()),
            store.audit_head().unwrap().seq,
            store.run(&run).unwrap().map(|r| r.events),
        ),
        (
            vec!["run_started".to_owned(), "fine".to_owned()],
            2,
            Some(2)
        )
    );
}

/// A sealer whose lines name the record before them, so the test can check afterwards that
/// each partition's committed records are one line.
struct Linked;

impl warrant_store::Sealer for Linked {
    fn seal(
        &self,
        head: &warrant_store::ChainHead,
        event: &warrant_store::StoredEvent,
        _audit: &serde_json::Value,
        _batch_end: u64,
    ) -> Result<warrant_store::SealedRecord, String> {
        let seq = head.seq + 1;
        let hash = format!("h{seq}:{}:{}", event.run, event.seq);
        Ok(warrant_store::SealedRecord {
            seq,
            id: format!("rec-{}-{}", event.run, event.seq),
            hash,
            line: serde_json::json!({"seq": seq, "prev": head.hash, "run": event.run}).to_string(),
        })
    }

    fn seal_in(
        &self,
        _part: u64,
        head: &warrant_store::ChainHead,
        event: &warrant_store::StoredEvent,
        audit: &serde_json::Value,
        batch_end: u64,
    ) -> Result<warrant_store::SealedRecord, String> {
        self.seal(head, event, audit, batch_end)
    }
}

/// Two run ids (as text) that fall in the same audit partition of a store of `partitions`.
fn two_runs_in_one_partition(partitions: u64) -> (String, String) {
    let mut first: std::collections::HashMap<u64, String> = std::collections::HashMap::new();
    for n in 0..1000 {
        let id = format!("run-{n:04x}");
        let part = warrant_store::partition_of(&id, partitions);
        if let Some(other) = first.get(&part) {
            return (other.clone(), id);
        }
        first.insert(part, id);
    }
    unreachable!("a thousand ids over {partitions} partitions always meet")
}

/// Each partition's committed records, in order: sequence numbers 1..n, and each line naming
/// the hash of the record before it (the first, the genesis hash).
fn assert_partitions_are_lines(db: &TestDb) {
    let rows = db
        .client()
        .query(
            "SELECT part, seq, hash, line FROM audit WHERE part >= 0 ORDER BY part, seq",
            &[],
        )
        .unwrap();
    let mut last: std::collections::HashMap<i64, (i64, String)> = Default::default();
    for row in rows {
        let (part, seq, hash, line): (i64, i64, String, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let line: serde_json::Value = serde_json::from_str(&line).unwrap();
        match last.get(&part) {
            Some((before, prev)) => {
                assert_eq!(
                    (seq, line["prev"].as_str()),
                    (before + 1, Some(prev.as_str()))
                );
            }
            None => assert_eq!(seq, 1, "partition {part} starts at {seq}"),
        }
        last.insert(part, (seq, hash));
    }
}

fn linked_append(
    run: &warrant_core::RunId,
    expected_seq: u64,
    fence: Option<u64>,
) -> warrant_store::Append {
    warrant_store::Append {
        run: run.clone(),
        expected_seq,
        events: vec![super::conformance::draft("step")],
        status: None,
        requests: vec![],
        fence,
    }
}

/// After a first append (in the locked transaction, where the process learns its partition's
/// head), an append is one guarded statement; when another process moved the partition's head
/// in between, the guard fails, nothing of the statement stays, and the locked path appends.
/// Each partition's chain is one line, and no event is lost or doubled.
#[test]
fn appends_are_guarded_statements_and_a_moved_head_falls_back_to_the_locked_path() {
    use warrant_store::{AuditOutbox as _, EventStore, GuardedAppends, PostgresStore};

    let db = TestDb::new();
    let one = PostgresStore::connect(&db.url, super::conformance::clock()).unwrap();
    let other = PostgresStore::connect(&db.url, super::conformance::clock()).unwrap();
    let partitions = one.audit_partitions().unwrap();
    assert!(partitions > 1, "a new PostgreSQL store is partitioned");
    let (a, b) = two_runs_in_one_partition(partitions);
    let a = super::conformance::started_run_sealed(&one, &a, &Linked);
    let b = super::conformance::started_run_sealed(&other, &b, &Linked);

    for seq in 2..=4 {
        one.append(linked_append(&a, seq, None), &Linked).unwrap();
    }
    assert_eq!(
        one.guarded_appends(),
        GuardedAppends {
            committed: 2,
            fell_back: 0
        }
    );
    // Another process appends to the same partition: what `one` knows of its head is stale.
    other.append(linked_append(&b, 2, None), &Linked).unwrap();
    one.append(linked_append(&a, 5, None), &Linked).unwrap();
    assert_eq!(
        one.guarded_appends(),
        GuardedAppends {
            committed: 2,
            fell_back: 1
        }
    );
    one.append(linked_append(&a, 6, None), &Linked).unwrap();
    assert_eq!(one.guarded_appends().committed, 3);

    let seqs = |run| {
        one.events(run)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!((seqs(&a), seqs(&b)), (vec![1, 2, 3, 4, 5, 6], vec![1, 2]));
    assert_eq!(one.run(&a).unwrap().map(|r| r.events), Some(6));
    assert_partitions_are_lines(&db);

    // An append that expects a step the run already has fails its guard, then is refused by
    // the locked path as the conflict it is; nothing is written.
    let refused = one.append(linked_append(&a, 6, None), &Linked).unwrap_err();
    assert!(
        matches!(refused, warrant_store::StoreError::Conflict { .. }),
        "{refused:?}"
    );
    assert_eq!(seqs(&a).len(), 6);
    assert_partitions_are_lines(&db);
}

/// An append that must not commit once its run is stopped is still one guarded statement: the
/// switches and the cancellations are part of its guard. With a switch set, the statement
/// fails as a whole, the locked path finds the run stopped too, and nothing is written. An
/// append that reads them is one guarded statement too, and commits either way.
#[test]
fn an_append_unless_stopped_is_one_guarded_statement() {
    use warrant_store::{
        EnvelopeStore as _, EventStore, GuardedAppends, KillScope, KillSubject, PostgresStore,
        StoreError,
    };

    let db = TestDb::new();
    let one = PostgresStore::connect(&db.url, super::conformance::clock()).unwrap();
    let a = super::conformance::started_run_sealed(&one, "run-0001", &Linked);
    let runs = [a.clone()];
    let subject = KillSubject {
        tenant: "acme",
        actors: &["alice"],
        runs: &runs,
    };
    one.append(linked_append(&a, 2, None), &Linked).unwrap();
    one.append_unless_stopped(linked_append(&a, 3, None), &subject, &Linked)
        .unwrap();
    assert_eq!(
        one.guarded_appends(),
        GuardedAppends {
            committed: 1,
            fell_back: 0
        }
    );
    one.set_kill(&KillScope::Actor("alice".into()), "ops", "stop")
        .unwrap();
    let refused = one
        .append_unless_stopped(linked_append(&a, 4, None), &subject, &Linked)
        .unwrap_err();
    assert!(matches!(refused, StoreError::Stopped { .. }), "{refused:?}");
    assert_eq!(
        one.guarded_appends(),
        GuardedAppends {
            committed: 1,
            fell_back: 1
        }
    );
    assert_eq!(one.events(&a).unwrap().len(), 3);
    // Reading the signals instead: one guarded statement that commits and says what it saw.
    one.append(linked_append(&a, 4, None), &Linked).unwrap();
    let (_, stopped) = one
        .append_reading_stops(linked_append(&a, 5, None), &subject, &Linked)
        .unwrap();
    assert!(stopped);
    one.lift_kill(&KillScope::Actor("alice".into()), "ops", "go on")
        .unwrap();
    let (_, stopped) = one
        .append_reading_stops(linked_append(&a, 6, None), &subject, &Linked)
        .unwrap();
    assert!(!stopped);
    assert_eq!(
        one.guarded_appends(),
        GuardedAppends {
            committed: 3,
            fell_back: 1
        }
    );
    assert_eq!(one.events(&a).unwrap().len(), 6);
    assert_partitions_are_lines(&db);
}

/// The fence holds on the guarded path too: after the lease moved to another holder, the old
/// holder's append (its statement guarded by the token it presents) writes nothing and is
/// refused as fenced, the refusal kept. The negative control drops the token from the guard
/// (`WARRANT_TEST_DISABLE=append-fence-guard`, in a child process): the stale holder's
/// append then lands.
#[test]
fn a_stale_holder_s_guarded_append_is_fenced() {
    let db = TestDb::new();
    let guarded = fenced_append_in_child(&db, None);
    assert!(guarded.starts_with("fenced"), "{guarded}");
    let events: i64 = db
        .client()
        .query_one("SELECT count(*) FROM events", &[])
        .unwrap()
        .get(0);
    assert_eq!(events, 2, "the stale holder's event was written");
    let kept: i64 = db
        .client()
        .query_one("SELECT count(*) FROM fence_rejections", &[])
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);

    let control = TestDb::new();
    let unguarded = fenced_append_in_child(&control, Some("append-fence-guard"));
    assert_eq!(
        unguarded, "appended",
        "without the token in the guard the append lands"
    );
}

/// Runs [`fenced_append_child`] in a child process of this test binary (an environment knob
/// must not reach the other tests of this one): what the stale holder's append came to.
fn fenced_append_in_child(db: &TestDb, disable: Option<&str>) -> String {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "suite::pg::fenced_append_child",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WARRANT_FENCE_CHILD_DB", &db.url)
        .env_remove("WARRANT_TEST_DISABLE");
    if let Some(knob) = disable {
        child.env("WARRANT_TEST_DISABLE", knob);
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("outcome: ").map(|(_, outcome)| outcome.trim()))
        .unwrap_or_else(|| panic!("the child said nothing: {stdout}"))
        .to_owned()
}

/// The child of [`a_stale_holder_s_guarded_append_is_fenced`] (does nothing on its own).
#[test]
#[ignore = "run by a_stale_holder_s_guarded_append_is_fenced in a child process"]
fn fenced_append_child() {
    use warrant_store::{EventStore, PostgresStore};

    let Ok(url) = std::env::var("WARRANT_FENCE_CHILD_DB") else {
        return;
    };
    let store = PostgresStore::connect(&url, super::conformance::clock()).unwrap();
    let run = super::conformance::started_run(&store, "run-fe7ce");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .execute(
            "UPDATE runs SET lease_holder = 'old', lease_token = 7 WHERE run_id = $1",
            &[&run.as_str()],
        )
        .unwrap();
    // The holder appends under its token (the locked path: the process learns the head).
    store
        .append(linked_append(&run, 2, Some(7)), &Linked)
        .unwrap();
    // The lease moves on to another holder.
    admin
        .execute(
            "UPDATE runs SET lease_holder = 'new', lease_token = 8 WHERE run_id = $1",
            &[&run.as_str()],
        )
        .unwrap();
    let outcome = match store.append(linked_append(&run, 3, Some(7)), &Linked) {
        Ok(_) => "appended".to_owned(),
        Err(warrant_store::StoreError::Fenced { .. }) => "fenced".to_owned(),
        Err(e) => format!("failed: {e}"),
    };
    println!("outcome: {outcome}");
}
