"""vLLM's KV-cache arithmetic under one release's rules, one module per vLLM function family.

Mirror index (vLLM v1; the module docstrings give the facts and the releases they change in):

* :mod:`~mmcli.kv.engine.ranks`: the layers one tensor-parallel rank builds (KV heads per rank,
  as ``ModelConfig.get_num_kv_heads`` splits them; the dtypes; a drafter's layers).
* :mod:`~mmcli.kv.engine.layout`: ``get_kv_cache_groups`` and
  ``unify_kv_cache_spec_page_size`` (grouping, page sizes), the hybrid block-size alignment,
  ``get_max_concurrency_for_kv_cache_config``, and the search behind
  ``estimate_max_model_len``.
* :mod:`~mmcli.kv.engine.pipeline`: ``get_pp_indices`` (layers per stage) and each stage's
  share of the pool.
* :mod:`~mmcli.kv.engine.states`: a request's recurrent states (``MambaSpec``'s
  ``max_memory_usage_bytes``: prefix caching's modes, ``num_speculative_blocks``) and
  ``SpeculativeConfig``'s ``num_speculative_tokens``.
* :mod:`~mmcli.kv.engine.startable`: the models a release does not start (its registry).
* :mod:`~mmcli.kv.engine.capacity`: the block count and ``check_enough_kv_cache_memory`` (the
  start-up check), on one GPU or per pipeline stage.
"""
