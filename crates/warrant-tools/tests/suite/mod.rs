mod env;
mod normalize;
mod present;
