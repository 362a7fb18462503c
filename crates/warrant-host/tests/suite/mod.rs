mod answers;
mod construction;
mod operations;
mod toolbox;
mod views;
