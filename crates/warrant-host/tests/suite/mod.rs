mod construction;
mod operations;
mod views;
