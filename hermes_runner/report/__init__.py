"""The HTML report of a run dir or a sweep: page, summary tables, SVG charts, trajectory viewer.

It reads data, never code: it may import only `rundir/`, `trajectory/`, `util/`, `config` and `errors`."""
