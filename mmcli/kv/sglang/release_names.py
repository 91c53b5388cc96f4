"""SGLang release names that are not rows of the rule table: the short and post-release
spellings that map onto a row, and the ``ServerArgs`` field that first appears in each release
(for ``kv-share explain``, which dates a log by its ``server_args`` line).
"""

from __future__ import annotations

#: Short spellings of a read release (``0.4.6`` is the 0.4.6.post5 wheel that was read), and
#: post releases read and found to size the pool as their base release does.
ALIASES = {
    "0.4.6": "0.4.6.post5",
    "0.4.9": "0.4.9.post2",
    "0.5.5.post1": "0.5.5",
    "0.5.5.post2": "0.5.5",
    "0.5.5.post3": "0.5.5",
    "0.5.6.post1": "0.5.6",
    "0.5.6.post2": "0.5.6",
    "0.5.8.post1": "0.5.8",
    "0.5.10.post1": "0.5.10",
    "0.5.12.post1": "0.5.12",
    "0.5.13.post1": "0.5.13",
    "0.5.15.post1": "0.5.15",
}


#: A ``ServerArgs`` field first in each release (the dataclass of server_args.py of each wheel,
#: 0.5.4 – 0.5.19; each stays through 0.5.23, server_args.py / arg_groups): a ``server_args``
#: line that names one is of that release or a later one. 0.5.20 – 0.5.23 were not told apart.
ARGS_FIRST_IN: dict[str, str] = {
    "debug_tensor_dump_layers": "0.5.5",
    "enable_attn_tp_input_scattered": "0.5.6",
    "enable_dynamic_chunking": "0.5.7",
    "enable_prefill_delayer": "0.5.8",
    "attn_cp_size": "0.5.9",
    "disable_priority_preemption": "0.5.10",
    "batch_notify_size": "0.5.11",
    "detokenizer_worker_num": "0.5.12",
    "disable_attn_tp_gather": "0.5.13",
    "cuda_graph_backend_decode": "0.5.14",
    "dcp_size": "0.5.15",
    "elastic_ep_initial_size": "0.5.16",
    "dwdp_size": "0.5.17",
    "c128_page_size": "0.5.18",
    "dsv4_prefill_backend": "0.5.19",
}
