mod bad_input;
mod conformance;
mod pg;
mod pg_tls;
mod sqlite_files;
mod tenant;
