mod client;
pub mod peers;
