"""The report: its models, building it from trial records, the one reader of reports, the
statistics, exit codes, compare, merge, the pack provenance view and the HTML view."""
