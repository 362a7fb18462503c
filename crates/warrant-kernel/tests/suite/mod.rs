mod approvals;
mod authority;
mod denials;
mod fold;
mod harness;
mod replay;
mod scenarios;
mod session_grants;
