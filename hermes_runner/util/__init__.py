"""Small helpers every layer may use: fast JSON, the console and its log handler, secret redaction, the
garbage collector's start-up tuning, the SIGUSR1 report of where a run waits, backends by name (plugins), the
head/tail clipper and an exception's first line (text), the append-only JSONL file (appendlog).

They import nothing of hermes_runner but `config` and `errors`."""
