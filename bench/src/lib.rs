//! Benchmark helpers for `scripts/bench` (results: bench/RESULTS.md). The one
//! binary, `ptbench-libipt`, is the speed limit of any libipt-based decoder:
//! the same segments of the same trace with the same images as `ptdec`,
//! decoded by libipt's block decoder alone (`pt_blk_next`, counting
//! instructions), with no call stacks, timing or output.
#![deny(unsafe_code)]
