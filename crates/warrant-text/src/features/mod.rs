//! Words for the capabilities built on the operations: the chat session, memory, skills, agent
//! profiles, graphs, delegation, the kill switch and ceilings, artifacts and bundles, the data
//! catalog, and the servers. Each function takes a host view and returns the text a person
//! reads, lines joined by `\n` with no final line feed (a `Vec` where there may be no line).

pub mod artifacts;
pub mod catalog;
pub mod chat;
pub mod delegation;
pub mod envelope;
pub mod graph;
pub mod memory;
pub mod profiles;
pub mod servers;
pub mod skills;

/// Lines laid out by `writeln!` into a `String`, without the last line feed.
pub(crate) fn finish(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
    }
    text
}
