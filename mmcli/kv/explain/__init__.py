"""``kv-share explain``: read a vLLM start-up log, plan the same run, compare every figure."""
