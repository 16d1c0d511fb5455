"""The run directory on disk: file names (`layout`), ledger and atomic writes (`store`), manifest, statistics
(`stats`, with the score estimators of `metrics`), the reader of a finished or running run, shard merging and the import of hermes-agent batch files.

It may import only vocabulary: config, errors, usage, dataset, util."""
