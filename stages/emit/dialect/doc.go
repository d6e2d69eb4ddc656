// Package dialect escapes plugin output for the monitoring core that reads
// the external command file or the check_result_path spool, so that the core
// stores what the plugin printed. It is pure: no I/O, no state.
//
// Each core undoes a different escaping (read from the cores' sources:
// Nagios Core 4.4 base/commands.c and base/utils.c, Icinga 2.13 to 2.15
// lib/icinga/externalcommandprocessor.cpp, lib/icinga/compatutility.cpp and
// lib/compat/checkresultreader.cpp, naemon-core src/naemon/commands.c,
// checks.c, utils.c and shared.c):
//
// # nagios (the default)
//
// Stock nsca's escaping, byte for byte: `\` becomes `\\` and a newline
// becomes `\n`, in the command file and in spool files alike. Nagios Core
// 4.1 and later undo both (unescape_check_result_output), for host and
// service results, in the command pipe and in check_result_path files.
// Spool lines ending in `\\` lose one backslash to the reader's line
// continuation rule before unescaping, which stock's doubling survives (a
// run of 2k backslashes becomes 2k-1 and unescapes to k). The only loss:
// in a spool file, a carriage return right after a final backslash is
// dropped by that rule; the bytes stay stock's, AppendSpool reports it.
//
// # icinga2
//
// Icinga 2's command pipe replaces every `\n` (backslash, n) of a
// PROCESS_SERVICE_CHECK_RESULT's output by a newline, from left to right,
// and does nothing else: `\\` stays two backslashes. The output of a
// PROCESS_HOST_CHECK_RESULT is not unescaped at all. So, for service
// results, a newline is written as `\n` and every other byte as it is; for
// host results every byte is written as it is. Icinga 2 (up to 2.13; 2.14
// removed it) read check_result_path files with the service rule for host
// and service results alike; spool output is escaped as service output.
// Semicolons need nothing: Icinga 2 joins the excess fields of the last
// argument back with ";".
//
// Lossy forms:
//   - a plugin's backslash followed by `n` cannot reach Icinga 2 through
//     the service rule (it always becomes a newline): that backslash is
//     written as `/`, so `C:\new\temp` is stored as `C:/new\temp`, which
//     keeps the length, the line and a usable Windows path;
//   - a newline in a host result cannot reach Icinga 2 (the pipe ends the
//     command there and nothing is unescaped): it is written as the two
//     characters `\n`, as stock writes it, so the result keeps one line.
//
// # naemon
//
// Naemon's command pipe passes plugin output through unchanged: no
// unescaping, for host and service results. Every byte is written as it is.
// Naemon's check_result_path reader (unescape_plugin_output) replaces `\n`
// by a newline and leaves every other byte, `\\` included, alone; before
// that its line reader joins a line ending in one `\` with the next line and
// turns a line ending in `\\` into one ending in `\`.
//
// Naemon command pipe:
//   - a newline cannot reach Naemon through the pipe: it is written as the
//     two characters `\n` (lossy), as stock writes it; use check_result_path
//     for multi-line output;
//   - an empty output would make Naemon reject the whole command ("no value
//     for argument plugin_output"): it is written as one space, which
//     Naemon strips again, so the core stores the empty output (not lossy).
//
// Naemon spool files: a newline is written as `\n`; a backslash followed by
// `n` is written as `/` (lossy, as for Icinga 2); an output ending in a
// backslash gets one more backslash, which the line reader removes again;
// an output ending in backslash and carriage return cannot survive the line
// reader: the carriage return is dropped (lossy).
//
// Whatever a core does next (Icinga 2 and Naemon split perfdata at `|` and
// lines at newlines, Icinga 2 also at carriage returns, Naemon strips
// spaces around the first line) happens to every source of results alike
// and is not undone here.
package dialect
