//! The fallback PostgreSQL server and URL handling of the test kit, checked here.
#![allow(clippy::print_stderr)]

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
