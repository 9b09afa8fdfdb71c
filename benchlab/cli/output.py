"""What `benchlab` writes: results on stdout, progress and messages on stderr (a
redirected report stays clean). A progress line rewrites itself on a terminal."""

import sys
from typing import TextIO


class Output:
    """stdout for results; stderr for progress and messages."""

    def __init__(self, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self.out = out
        self.err = err
        self._progress_shown = ""

    def result(self, text: str) -> None:
        self.end_progress()
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.out.flush()

    def message(self, text: str) -> None:
        self.end_progress()
        self.err.write(text + "\n")
        self.err.flush()

    def progress(self, line: str) -> None:
        """Show `line`: in place on a terminal, else once per change."""
        if line == self._progress_shown:
            return
        if self.err.isatty():
            self.err.write("\r" + line.ljust(len(self._progress_shown)))
        else:
            self.err.write(line + "\n")
        self.err.flush()
        self._progress_shown = line

    def end_progress(self) -> None:
        if self._progress_shown and self.err.isatty():
            self.err.write("\n")
        self._progress_shown = ""
