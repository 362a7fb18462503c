mod conformance;
mod sqlite_files;
