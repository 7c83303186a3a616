//! Fuchsia Trace Format (FTF) writer and reader. Knows nothing about Intel PT:
//! `ptdec` feeds it threads, slices and instants; tests read files back as text.
#![forbid(unsafe_code)]
