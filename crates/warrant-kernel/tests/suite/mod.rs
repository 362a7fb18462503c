mod approvals;
mod authority;
mod denials;
mod fold;
mod harness;
mod journal;
mod replay;
mod scenarios;
