//! Words for the operations every front end has.
