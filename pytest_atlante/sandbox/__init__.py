"""The sandbox: where a trial's commands run and what is recorded about them.

A trial's directory (assembly, baseline, diff), git objects written in-process, the run's copies
of fixtures and build tree, the hermeticity audit, run directories in ``$TMPDIR``, namespace
isolation, processes and their reaper, and the one definition of a secret (``redact``).  Knows no
document model, no host and no report.
"""
