mod fake;
mod keys;
mod schema;
mod seal;
mod sink;
mod verify;
