"""SGLang release names that are not rows of the rule table: the short and post-release
spellings that map onto a row, and the ``ServerArgs`` field that first appears in each release
(for ``kv-share explain``, which dates a log by its ``server_args`` line).
"""

from __future__ import annotations

from mmcli.kv.sglang import swa_lists as sl
from mmcli.kv.sglang.swa_lists import MIMO_V2, STEP3P5

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

#: The architectures each release adds to ``is_hybrid_swa_model`` (configs/model_config.py),
#: and all of them up to each release: their hybrid sliding-window pool is refused by name.
SWA_ADDED: dict[str, tuple[str, ...]] = {  # is_hybrid_swa_model additions: see swa_lists.py
    "0.5.10": (*MIMO_V2, *STEP3P5),
    "0.5.11": ("MiMoV2ForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"),
    "0.5.12": ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "LagunaForCausalLM"),
    "0.5.13": ("Step3p7ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration"),
    "0.5.14": (),
    "0.5.15": ("UnlimitedOCRForCausalLM",),
    "0.5.16": sl.INKLING_MELLUM,
    "0.5.17": (),
    "0.5.18": sl.MUSE_GLIMMER,
    "0.5.19": sl.GRANITE_SWA,
    "0.5.20": (),
    "0.5.21": sl.IQUEST_DIFFUSION,
    "0.5.22": sl.EMBEDDING_GEMMA2,
    "0.5.23": sl.BEAM,
}
_SWA_KEYS = list(SWA_ADDED)
UNMIRRORED = {
    n: tuple(a for m in _SWA_KEYS[: i + 1] for a in SWA_ADDED[m]) for i, n in enumerate(_SWA_KEYS)
}
