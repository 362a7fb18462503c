mod decode;
mod format;
mod layers;
mod report;
mod scan;
mod translated;
