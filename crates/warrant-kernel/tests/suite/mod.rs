mod approvals;
mod denials;
mod fold;
mod harness;
mod replay;
mod scenarios;
