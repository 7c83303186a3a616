//! Interrupting signals: unfinished outputs removed before exiting.

use crate::outfile;

/// SIGINT, SIGTERM and SIGHUP end ptdec with a message and 128 + the
/// signal's number, after removing what an unfinished output left
/// (`outfile::abandon`; an output being put in place is completed first).
/// SIGKILL cannot be caught: an unfinished output is then an unnamed file
/// that vanishes with the process (or, on a filesystem without
/// `O_TMPFILE`, a `.NAME.ptdec-PID-N.tmp` beside it that stays). A signal
/// ignored when ptdec started (`nohup`, a shell's background job) stays
/// ignored.
pub fn on_interrupt() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let ignored = ignored_signals();
    let caught = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| ignored & (1 << (s - 1)) == 0);
    let Ok(mut signals) = signal_hook::iterator::Signals::new(caught) else {
        // Without a handler the signal's default action ends the run:
        // unnamed temporaries still vanish.
        return;
    };
    std::thread::spawn(move || {
        let Some(sig) = signals.forever().next() else {
            return;
        };
        // `--check`'s trace_processor_shell runs in a group of its own,
        // which a Ctrl-C at the terminal does not reach.
        crate::check::stop_running();
        let unfinished = outfile::abandon();
        let name = match sig {
            SIGINT => "SIGINT",
            SIGTERM => "SIGTERM",
            _ => "SIGHUP",
        };
        let mut what = String::new();
        if !unfinished.is_empty() {
            let list: Vec<String> = unfinished.iter().map(|p| p.display().to_string()).collect();
            what = format!("; {} not written (nothing of it is left)", list.join(", "));
        }
        // Written where they are (a pipe, a FIFO): their readers got part.
        let partial: Vec<String> = outfile::in_place()
            .iter()
            .map(|p| match p.to_str() {
                Some("-") => "standard output".to_string(),
                _ => p.display().to_string(),
            })
            .collect();
        if !partial.is_empty() {
            what += &format!(
                "; what {} got is incomplete: do not use it",
                partial.join(", ")
            );
        }
        // On its own line after a progress bar.
        let nl = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            "\n"
        } else {
            ""
        };
        sideband::say!("{nl}ptdec: interrupted by {name}{what}");
        std::process::exit(128 + sig);
    });
}

/// The signals this process ignores (bit `n - 1` for signal `n`), as
/// /proc/self/status's `SigIgn` lists them; none when it cannot be read.
/// (The tests ask too: a signal ignored there cannot interrupt ptdec.)
pub fn ignored_signals() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}
