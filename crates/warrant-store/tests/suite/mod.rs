mod bad_input;
mod conformance;
mod pg;
mod sqlite_files;
