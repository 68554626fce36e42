// Interrupting a run without losing it: SIGINT (Ctrl-C) and SIGTERM only ask the program to
// stop; the training loop finishes its step, writes the checkpoint it was asked for, and exits
// with 128 + the signal's number. A second signal stops at once. SIGUSR1 and SIGUSR2 say the
// same as SIGINT and SIGTERM: the built-in launcher of CPU ranks sends them through mpirun,
// which passes them to the ranks as they are (it would turn SIGINT and SIGTERM into a SIGTERM
// and, a second later, a SIGKILL). A write that would exceed the
// file-size limit fails like a full disk (SIGXFSZ ignored) instead of killing the process, so
// that no temporary file is left behind.
#pragma once

namespace tt {

// For the training loop, which checks stop_requested() between steps.
void install_stop_handlers();
// For every command: SIGXFSZ ignored.
void ignore_file_size_signal();
// The signal that asked to stop (SIGINT, SIGTERM), or 0.
int stop_requested();

}  // namespace tt
