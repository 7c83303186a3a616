//! Simulated buffers for tests and the benchmark (filled in next).
