//! The HTTP sink against a real receiver on 127.0.0.1 that fails in scripted ways (5xx, 429
//! with `Retry-After`, a connection dropped mid-body, an answer later than the timeout) and then
//! recovers. The receiver is a raw `TcpListener`: tiny_http answers 500 for a request dropped
//! unanswered, so it cannot drop a connection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use warrant_audit::{
    AuditError, AuditKey, HttpDeliveryReport, HttpSink, HttpSinkConfig, PublicKeys, verify_lines,
};
use warrant_core::Coded as _;
use warrant_store::SealedRecord;

use super::fake::{SEED, chain};

const SECRET: &str = "Bearer s3cret-token-42";
/// The client's timeout; a late answer comes well after it.
const TIMEOUT: Duration = Duration::from_secs(1);
const LATE: Duration = Duration::from_secs(3);

/// What the receiver does with one request (one connection: it always answers
/// `Connection: close`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Takes the batch and answers 200.
    Ok,
    /// Answers this status (with this `Retry-After`), not taking the batch.
    Status(u16, Option<u64>),
    /// Reads half the body, then closes the socket without answering.
    Drop,
    /// Takes the batch, but answers only after the client has given up.
    Late,
}

/// What the receiver saw of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    step: Step,
    /// Lower-case names.
    headers: BTreeMap<String, String>,
    /// Record ids of the body; empty when the body was not read whole.
    ids: Vec<String>,
}

struct State {
    script: VecDeque<Step>,
    /// What every request past the script gets.
    then: Step,
    seen: Vec<Seen>,
    /// Records taken, deduplicated by id, in arrival order.
    taken: Vec<String>,
    taken_ids: HashSet<String>,
}

struct Receiver {
    url: String,
    state: Arc<Mutex<State>>,
}

impl Receiver {
    fn start(script: Vec<Step>, then: Step) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/audit", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(State {
            script: script.into(),
            then,
            seen: Vec::new(),
            taken: Vec::new(),
            taken_ids: HashSet::new(),
        }));
        let shared = Arc::clone(&state);
        // Lives until the test binary exits; each connection gets its own thread so a late
        // answer does not hold up the client's retry.
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let step = {
                    let mut s = shared.lock().unwrap();
                    let then = s.then;
                    s.script.pop_front().unwrap_or(then)
                };
                let shared = Arc::clone(&shared);
                thread::spawn(move || handle(stream, step, &shared));
            }
        });
        Self { url, state }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn taken(&self) -> Vec<String> {
        self.state.lock().unwrap().taken.clone()
    }
}

fn handle(mut stream: TcpStream, step: Step, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    assert!(request_line.starts_with("POST /audit "), "{request_line}");
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
    }
    let len: usize = headers
        .get("content-length")
        .expect("the sink sends a Content-Length")
        .parse()
        .unwrap();
    let mut seen = Seen {
        step,
        headers,
        ids: Vec::new(),
    };
    if step == Step::Drop {
        let mut part = vec![0; len / 2];
        reader.read_exact(&mut part).unwrap();
        state.lock().unwrap().seen.push(seen);
        // Both handles go: the socket closes with no answer and unread bytes.
        return;
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let records: Vec<Value> = serde_json::from_slice(&body).unwrap();
    seen.ids = records
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    let echo = seen
        .headers
        .get("authorization")
        .cloned()
        .unwrap_or_default();
    {
        let mut s = state.lock().unwrap();
        s.seen.push(seen);
        if matches!(step, Step::Ok | Step::Late) {
            for record in records {
                let id = record["id"].as_str().unwrap().to_owned();
                if s.taken_ids.insert(id) {
                    s.taken.push(record.to_string());
                }
            }
        }
    }
    let (status, retry_after, text) = match step {
        Step::Ok => (200, None, "{}".to_owned()),
        Step::Late => {
            thread::sleep(LATE);
            (200, None, "{}".to_owned())
        }
        Step::Status(400, retry_after) => (400, retry_after, format!("bad batch; you sent {echo}")),
        Step::Status(status, retry_after) => (status, retry_after, "not now".to_owned()),
        Step::Drop => unreachable!(),
    };
    let mut answer = format!(
        "HTTP/1.1 {status} Scripted\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    if let Some(secs) = retry_after {
        answer.push_str(&format!("Retry-After: {secs}\r\n"));
    }
    answer.push_str("\r\n");
    answer.push_str(&text);
    // A late answer goes to a client that has hung up.
    let _ = stream
        .write_all(answer.as_bytes())
        .and_then(|()| stream.flush());
}

/// A sink whose waits are recorded instead of slept.
fn sink(config: HttpSinkConfig) -> (HttpSink, Arc<Mutex<Vec<Duration>>>) {
    let waits = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&waits);
    let sink = HttpSink::new("siem", config).with_sleep(move |d| record.lock().unwrap().push(d));
    (sink, waits)
}

fn config(url: &str) -> HttpSinkConfig {
    HttpSinkConfig {
        headers: vec![
            ("Authorization".to_owned(), SECRET.to_owned()),
            ("X-Tenant".to_owned(), "acme".to_owned()),
        ],
        batch: 10,
        timeout: TIMEOUT,
        ..HttpSinkConfig::new(url)
    }
}

/// The key the receiver should see for a batch: hex SHA-256 of the ids joined by ",".
fn key(records: &[SealedRecord]) -> String {
    let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    hex::encode(Sha256::digest(ids.join(",").as_bytes()).as_slice())
}

fn ids(records: &[SealedRecord]) -> Vec<String> {
    records.iter().map(|r| r.id.clone()).collect()
}

fn lines(records: &[SealedRecord]) -> Vec<String> {
    records.iter().map(|r| r.line.clone()).collect()
}

/// (step, Idempotency-Key, ids) of each request, the shape most assertions need.
fn requests(receiver: &Receiver) -> Vec<(Step, String, Vec<String>)> {
    receiver
        .seen()
        .into_iter()
        .map(|s| {
            assert_eq!(
                (
                    s.headers.get("content-type").map(String::as_str),
                    s.headers.get("authorization").map(String::as_str),
                    s.headers.get("x-tenant").map(String::as_str),
                ),
                (
                    Some("application/cloudevents-batch+json"),
                    Some(SECRET),
                    Some("acme")
                )
            );
            (s.step, s.headers["idempotency-key"].clone(), s.ids)
        })
        .collect()
}

#[test]
fn every_record_arrives_once_in_order_through_failures_and_verifies() {
    let store = chain(25);
    let records = store.records();
    let (b1, b2, b3) = (&records[..10], &records[10..20], &records[20..]);
    let receiver = Receiver::start(
        vec![
            Step::Status(500, None),
            Step::Drop,
            Step::Status(429, Some(1)),
            Step::Ok,
            Step::Late,
            Step::Ok,
        ],
        Step::Ok,
    );
    let (sink, waits) = sink(config(&receiver.url));

    let report = sink.deliver(&store, 0).unwrap();

    assert_eq!(
        report,
        HttpDeliveryReport {
            acknowledged: 25,
            delivered: 25,
            batches: 3,
            retries: 4,
            last_error: Some("no answer within 1s".to_owned()),
        }
    );
    assert_eq!(
        requests(&receiver),
        vec![
            (Step::Status(500, None), key(b1), ids(b1)),
            (Step::Drop, key(b1), vec![]),
            (Step::Status(429, Some(1)), key(b1), ids(b1)),
            (Step::Ok, key(b1), ids(b1)),
            (Step::Late, key(b2), ids(b2)),
            (Step::Ok, key(b2), ids(b2)),
            (Step::Ok, key(b3), ids(b3)),
        ]
    );
    // Batch 2 reached the receiver twice; dedup by id leaves each record once, in seq order,
    // byte for byte as sealed.
    let taken = receiver.taken();
    assert_eq!(taken, lines(&records));

    // Full jitter below the doubling ceiling, except where the receiver named a wait.
    let waits = waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 4, "{waits:?}");
    assert_eq!(waits[2], Duration::from_secs(1));
    let ceilings = [200, 400, 0, 200].map(Duration::from_millis);
    for (i, (wait, ceiling)) in waits.iter().zip(ceilings).enumerate() {
        if i != 2 {
            assert!(wait <= &ceiling, "wait {i} was {wait:?}, above {ceiling:?}");
        }
    }

    let keys = PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()]);
    let verified = verify_lines((1..).zip(taken), &keys);
    assert!(verified.is_ok(), "{verified:?}");
    assert_eq!(verified.records, 25);
    assert_eq!(verified.head, Some(records[24].hash.clone()));
}

#[test]
fn a_refused_batch_stops_delivery_at_the_last_acknowledged_record() {
    let store = chain(25);
    let records = store.records();
    let receiver = Receiver::start(vec![Step::Ok, Step::Status(400, None)], Step::Ok);
    let (sink, waits) = sink(config(&receiver.url));

    let err = sink.deliver(&store, 0).unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::SinkRejected {
                status: 400,
                acknowledged: 10,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!((err.code(), err.acknowledged()), ("W-AUDIT-014", Some(10)));
    // The receiver echoed the Authorization header; the message must not repeat it.
    insta::assert_snapshot!(err.to_string());
    assert!(!format!("{err} {err:?}").contains("s3cret"));
    assert_eq!(
        requests(&receiver),
        vec![
            (Step::Ok, key(&records[..10]), ids(&records[..10])),
            (
                Step::Status(400, None),
                key(&records[10..20]),
                ids(&records[10..20])
            ),
        ]
    );
    assert!(waits.lock().unwrap().is_empty(), "a 4xx is not retried");

    // Once the receiver is fixed, delivery resumes from the error's cursor.
    let report = sink.deliver(&store, err.acknowledged().unwrap()).unwrap();
    assert_eq!(
        report,
        HttpDeliveryReport {
            acknowledged: 25,
            delivered: 15,
            batches: 2,
            retries: 0,
            last_error: None,
        }
    );
    assert_eq!(receiver.taken(), lines(&records));
}

#[test]
fn a_receiver_that_never_recovers_is_given_up_on_after_max_attempts() {
    let store = chain(5);
    let records = store.records();
    // It asks for 30 s each time; the cap keeps the sink from hanging on it.
    let receiver = Receiver::start(vec![], Step::Status(503, Some(30)));
    let (sink, waits) = sink(HttpSinkConfig {
        max_attempts: 3,
        backoff_max: Duration::from_secs(2),
        ..config(&receiver.url)
    });

    let err = sink.deliver(&store, 0).unwrap_err();
    assert_eq!((err.code(), err.acknowledged()), ("W-AUDIT-015", Some(0)));
    insta::assert_snapshot!(err.to_string());
    let attempt = (Step::Status(503, Some(30)), key(&records), ids(&records));
    assert_eq!(
        requests(&receiver),
        vec![attempt.clone(), attempt.clone(), attempt]
    );
    assert_eq!(*waits.lock().unwrap(), vec![Duration::from_secs(2); 2]);
    assert!(receiver.taken().is_empty());
}

#[test]
fn header_values_never_show_in_debug() {
    let (sink, _) = sink(config("http://127.0.0.1:9/audit"));
    let debug = format!("{sink:?} {:?}", sink.config());
    assert!(!debug.contains("s3cret"), "{debug}");
    insta::assert_snapshot!(format!("{:#?}", sink.config()));
}

#[test]
fn nothing_to_deliver_sends_nothing() {
    let store = chain(3);
    let receiver = Receiver::start(vec![], Step::Ok);
    let (sink, _) = sink(config(&receiver.url));
    assert_eq!(
        sink.deliver(&store, 3).unwrap(),
        HttpDeliveryReport {
            acknowledged: 3,
            ..HttpDeliveryReport::default()
        }
    );
    assert!(receiver.seen().is_empty());
}

/// A receiver that keeps the records it took and the last `Warrant-Checkpoint` it was sent
/// holds a copy that proves itself complete: cut one record from its end and verification
/// names the cut. Negative control: a sink without a checkpointer sends none, and the same cut
/// copy verifies as an intact chain (the cut goes unseen).
#[test]
fn each_batch_carries_a_signed_checkpoint_that_finds_records_cut_from_the_copy() {
    use base64::Engine as _;
    use warrant_audit::{CHECKPOINT_HEADER, CheckpointRule, Checkpointer, verify_copy};
    use warrant_core::{FixedClock, Timestamp};

    let keys = PublicKeys::from_keys([AuditKey::from_seed(SEED).verifying_key()]);
    let copy_of = |signing: bool| {
        let store = chain(25);
        let receiver = Receiver::start(vec![], Step::Ok);
        let (sink, _) = sink(config(&receiver.url));
        let sink = if signing {
            sink.with_checkpoint(Arc::new(Checkpointer::new(
                AuditKey::from_seed(SEED),
                super::fake::INSTALLATION,
                Arc::new(FixedClock(
                    Timestamp::from_millis(1_760_000_000_000).unwrap(),
                )),
                keys.clone(),
            )))
        } else {
            sink
        };
        sink.deliver(&store, 0).unwrap();
        let header = CHECKPOINT_HEADER.to_ascii_lowercase();
        let sent: Vec<Option<String>> = receiver
            .seen()
            .into_iter()
            .map(|s| s.headers.get(&header).cloned())
            .collect();
        (receiver.taken(), sent)
    };
    let check = |taken: &[String], checkpoint: Option<&String>, cut: usize| {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("received.jsonl");
        let kept = &taken[..taken.len() - cut];
        std::fs::write(
            &copy,
            kept.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        if let Some(value) = checkpoint {
            let json = base64::engine::general_purpose::STANDARD
                .decode(value)
                .unwrap();
            std::fs::write(warrant_audit::checkpoint_path(&copy), json).unwrap();
        }
        let report = verify_copy(
            std::slice::from_ref(&copy),
            false,
            &warrant_audit::checkpoint_path(&copy),
            &keys,
            CheckpointRule::IfPresent,
        )
        .unwrap();
        (
            report.chain.records,
            report.chain.first_problem.is_none(),
            report
                .checkpoint
                .map(|c| c.map(|c| c.seq))
                .map_err(|e| e.code()),
        )
    };

    let (taken, sent) = copy_of(true);
    assert_eq!(sent.len(), 3, "three batches");
    assert!(sent.iter().all(Option::is_some), "{sent:?}");
    let last = sent.last().unwrap().as_ref();
    assert_eq!(check(&taken, last, 0), (25, true, Ok(Some(25))));
    assert_eq!(check(&taken, last, 1), (24, true, Err("W-AUDIT-032")));

    let (taken, sent) = copy_of(false);
    assert!(sent.iter().all(Option::is_none), "{sent:?}");
    assert_eq!(check(&taken, None, 1), (24, true, Ok(None)));
}
