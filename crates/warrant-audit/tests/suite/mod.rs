mod binding;
mod fake;
mod http;
mod keys;
mod schema;
mod seal;
mod sink;
mod verify;
