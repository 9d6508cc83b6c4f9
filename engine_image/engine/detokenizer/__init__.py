"""The detokenizer process: token ids from the scheduler in, incremental text out."""
