mod common;
mod delegation;
mod explain;
mod layers;
mod monotonic;
mod scenarios;
mod validation;
