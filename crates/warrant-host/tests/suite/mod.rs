mod construction;
mod operations;
