//! The journal of an Agentic Graph run (`warrant-graph` schedules, the ring records): each
//! node's step is a `graph_node` event, appended together with what it starts (the node's
//! instructions as the run's next message, a gate's request or a criterion's command as a call
//! the graph makes), so a crash never leaves a step half-recorded.

use super::*;
use crate::graph::{GRAPH_CLIENT, NodeStep};

impl Ring<'_> {
    /// Journals one node step that starts nothing (an attempt failed, a node's end, a skip).
    pub fn record_graph_step(
        &self,
        state: &mut RunState,
        step: NodeStep,
    ) -> Result<(), KernelError> {
        self.append(state, vec![RunEvent::GraphNode(step)], None, vec![])
    }

    /// Starts a task or decision node's attempt: its step and the instructions, as the run's
    /// next message from the person it acts for, in one append. The run must wait for one.
    pub fn start_graph_turn(
        &self,
        state: &mut RunState,
        step: NodeStep,
        text: &str,
    ) -> Result<(), KernelError> {
        if !state.awaiting {
            return Err(KernelError::NotAwaitingMessage {
                run: state.run.to_string(),
                why: "is still answering the graph's previous node".to_owned(),
            });
        }
        let (text, neutralized) = warrant_core::render::neutralize(text);
        let by = state.principal.actor.clone();
        self.append(
            state,
            vec![
                RunEvent::GraphNode(step),
                RunEvent::MessageReceived {
                    by,
                    text,
                    neutralized,
                },
            ],
            Some(RunStatus::Running),
            vec![],
        )
    }

    /// A call the graph makes itself, with the node's step, in one append: a gate's or a
    /// checkpoint's request of a person, or a `command` criterion's `run_command`. Taken
    /// through the ring by [`Ring::process_call`] like any call: a request is raised and the
    /// run parks; a command is decided by policy (under the node's ceiling, which a `running`
    /// step carries) and runs confined, journaled and audited.
    pub fn raise_graph_call(
        &self,
        state: &mut RunState,
        step: NodeStep,
        call: CallRecord,
    ) -> Result<(), KernelError> {
        self.append(
            state,
            vec![
                RunEvent::GraphNode(step),
                RunEvent::CallReceived {
                    client: GRAPH_CLIENT.to_owned(),
                    call,
                },
            ],
            None,
            vec![],
        )
    }

    /// Ends a graph run: the last node's step and the run's end in one append.
    pub fn end_graph(
        &self,
        state: &mut RunState,
        last: Option<NodeStep>,
        outcome: Outcome,
    ) -> Result<(), KernelError> {
        let status = match &outcome {
            Outcome::Completed => RunStatus::Completed,
            Outcome::Failed { .. } => RunStatus::Failed,
            Outcome::Stopped { .. } => RunStatus::Stopped,
        };
        let mut events: Vec<RunEvent> = last.into_iter().map(RunEvent::GraphNode).collect();
        events.push(RunEvent::RunEnded { outcome });
        self.append(state, events, Some(status), vec![])
    }
}
