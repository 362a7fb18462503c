mod common;
mod delegation;
mod explain;
mod layers;
mod models;
mod monotonic;
mod scenarios;
mod validation;
