//! The blocking side: one thread owns the opened installation and runs every host operation
//! (a served call, a refusal's record) in order; the async server sends it jobs and awaits the
//! answers. The ring, the store and the host stay synchronous (docs/ARCHITECTURE.md, "The
//! async boundary").

use std::sync::Arc;
use std::sync::mpsc;

use tokio::sync::oneshot;
use warrant_host::serve::{CallOutcome, Export, ServedCall};
use warrant_host::{Host, HostError, Notices, Where};

/// Who makes a call: the installation's person (stdio), or the holder of a configured token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    Local,
    /// The token's entry name in `[mcp.serve.tokens]`.
    Token(String),
}

/// A configured token as the HTTP guard compares it: its SHA-256, never the value itself.
#[derive(Clone, Debug)]
pub struct TokenDigest {
    pub name: String,
    pub digest: warrant_core::Digest,
}

/// What the worker found when it opened the installation.
#[derive(Clone, Debug)]
pub struct Startup {
    pub export: Export,
    pub tokens: Vec<TokenDigest>,
    /// `[mcp.serve]` as the installation's layers set it (the HTTP guard's part).
    pub config: warrant_core::config::McpServeConfig,
}

enum Job {
    Call {
        caller: Caller,
        call: ServedCall,
        reply: oneshot::Sender<Result<CallOutcome, HostError>>,
    },
    Refused {
        transport: &'static str,
        status: u16,
        reason: String,
        suppressed: u64,
        recorded: oneshot::Sender<()>,
    },
}

/// The handle the async side holds.
#[derive(Clone, Debug)]
pub struct Worker {
    jobs: mpsc::Sender<Job>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Job")
    }
}

impl Worker {
    /// Opens the installation at `at` on a thread of its own and reads the export and tokens.
    /// `tokens`: read the HTTP tokens too (stdio has no use for them, and an unset one must
    /// not keep a desktop client from starting the server).
    pub fn start(
        at: Where,
        notices: Arc<dyn Notices + Send>,
        tokens: bool,
    ) -> Result<(Worker, Startup), HostError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::sync_channel::<Result<Startup, HostError>>(1);
        std::thread::Builder::new()
            .name("warrant-mcp-serve".into())
            .spawn(move || {
                let opened = Host::open(&at, notices).and_then(|host| {
                    let (export, toolbox) = host.serve_export()?;
                    let callers = if tokens {
                        host.serve_tokens()?
                    } else {
                        Vec::new()
                    };
                    Ok((host, export, toolbox, callers))
                });
                let (host, export, toolbox, callers) = match opened {
                    Ok(parts) => parts,
                    Err(e) => {
                        let _ = ready.send(Err(e));
                        return;
                    }
                };
                let tokens = callers
                    .iter()
                    .map(|c| TokenDigest {
                        name: c.name.clone(),
                        digest: warrant_core::Digest::of_bytes(c.token.as_bytes()),
                    })
                    .collect();
                let config = host.settings.mcp.serve.clone();
                if ready
                    .send(Ok(Startup {
                        export,
                        tokens,
                        config,
                    }))
                    .is_err()
                {
                    return;
                }
                for job in queue {
                    match job {
                        Job::Call {
                            caller,
                            call,
                            reply,
                        } => {
                            let principal = match &caller {
                                Caller::Local => Some(host.identity.principal.clone()),
                                Caller::Token(name) => callers
                                    .iter()
                                    .find(|c| &c.name == name)
                                    .map(|c| c.principal.clone()),
                            };
                            let outcome = match principal {
                                Some(p) => host.serve_call(&toolbox, &p, call),
                                None => Err(HostError::usage(
                                    "W-MCPSERVE-003",
                                    "the caller's token is not configured",
                                )),
                            };
                            let _ = reply.send(outcome);
                        }
                        Job::Refused {
                            transport,
                            status,
                            reason,
                            suppressed,
                            recorded,
                        } => {
                            // Answered either way: a record that cannot be written must not
                            // let the request through.
                            let _ =
                                host.record_refused_access(transport, status, &reason, suppressed);
                            let _ = recorded.send(());
                        }
                    }
                }
            })
            .map_err(|e| HostError::usage("W-MCPSERVE-007", e.to_string()))?;
        let startup = started.recv().map_err(|_| {
            HostError::usage(
                "W-MCPSERVE-007",
                "the serving thread ended before it started",
            )
        })??;
        Ok((Worker { jobs }, startup))
    }

    /// Runs `call` through the ring as `caller` and waits for its outcome.
    pub async fn call(&self, caller: Caller, call: ServedCall) -> Result<CallOutcome, HostError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Call {
                caller,
                call,
                reply,
            })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Records a refused HTTP request, and returns once it is recorded (or could not be).
    pub async fn refused(
        &self,
        transport: &'static str,
        status: u16,
        reason: String,
        suppressed: u64,
    ) {
        let (recorded, done) = oneshot::channel();
        if self
            .jobs
            .send(Job::Refused {
                transport,
                status,
                reason,
                suppressed,
                recorded,
            })
            .is_ok()
        {
            let _ = done.await;
        }
    }
}

fn stopped() -> HostError {
    HostError::usage("W-MCPSERVE-007", "the serving thread has stopped")
}
