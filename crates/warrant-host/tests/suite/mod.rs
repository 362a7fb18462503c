mod construction;
mod operations;
mod views;
mod toolbox;
