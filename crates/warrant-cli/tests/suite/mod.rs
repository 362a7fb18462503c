mod approvals;
mod audit;
mod bad_input;
mod harness;
mod identity;
mod openai;
mod policy;
mod quickstart;
