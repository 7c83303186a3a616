//! Library half of the binary: the work lives here, main.rs parses arguments.
