//! A plain stdio relay for the proxy bench: `rb-bench-relay CMD [ARGS…]`
//! starts `CMD`, copies its standard input to the command's and the command's
//! standard output to its own, byte for byte, each read written on and
//! flushed at once, one thread a direction. It reads no JSON: it is the floor
//! under what any stdio proxy adds (two more pipe hops and two more processes
//! waking), so the bench can tell the proxy's own cost from the hop's.

use std::io::{Read, Write};
use std::process::{Command, ExitCode, Stdio};

/// Copy `from` to `to` until end of input or an error, flushing every read.
fn pump(mut from: impl Read, mut to: impl Write) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let Some(bytes) = buf.get(..n) else { return };
        if to.write_all(bytes).and_then(|()| to.flush()).is_err() {
            return;
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(cmd) = args.next() else {
        eprintln!("usage: rb-bench-relay CMD [ARGS…]");
        return ExitCode::from(2);
    };
    let mut child = match Command::new(&cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "rb-bench-relay: cannot start {}: {e}",
                cmd.to_string_lossy()
            );
            return ExitCode::from(1);
        }
    };
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return ExitCode::from(1);
    };
    // Closing the command's input when ours ends lets it exit.
    std::thread::spawn(move || pump(std::io::stdin().lock(), child_in));
    pump(child_out, std::io::stdout().lock());
    match child.wait() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}
