"""A tiny vision-language model with SGLang's model-side names (``get_image_feature``,
``get_input_embeddings``, a language model called with ``input_embeds``), and prompts built as
SGLang's processors pad them: each image's placeholder tokens hold the item's pad value."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from fake_sglang_shared.inputs import (
    ForwardBatch,
    ForwardMode,
    Modality,
    MultimodalDataItem,
    MultimodalInputs,
)

HIDDEN = 16
VOCAB = 64
IM_START, IM_END = 5, 6
IMAGE_TOKEN = 63


class FakeLanguageModel(torch.nn.Module):
    """The language model: token embeddings, and a forward that hands back its input."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(VOCAB, HIDDEN)

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embed_tokens

    def forward(self, input_ids: Any, forward_batch: Any, input_embeds: Any, **kwargs: Any) -> Any:
        return input_embeds


class FakeVLM(torch.nn.Module):
    """``get_image_feature(items)``: each image's rows (its feature's value marks them),
    concatenated (or one tensor per item with ``per_item``); ``fault`` breaks it."""

    def __init__(self, fault: str | None = None, per_item: bool = False) -> None:
        super().__init__()
        # Qwen2-VL-like: the language model's hidden size at the top level, the image
        # placeholder as image_token_id (the prompt holds pad values in its place).
        self.config = SimpleNamespace(
            hidden_size=HIDDEN, image_token_id=IMAGE_TOKEN, _name_or_path="fake/tiny-vlm"
        )
        self.language_model = FakeLanguageModel()
        self.fault = fault
        self.per_item = per_item
        self.calls: list[list[Any]] = []
        self.deepstack_visual_indexes: list[int] = []  # Qwen3-VL-like: [8, 16, 24]

    def get_image_feature(self, items: list[Any]) -> Any:
        self.calls.append(list(items))
        outs = []
        for item in items:
            for rows in item.feature:  # one entry per image of the item: (rows, 1)
                outs.append(rows.expand(-1, HIDDEN) + torch.arange(HIDDEN))
        if self.fault == "one-short":
            outs[-1] = outs[-1][:-1]
        elif self.fault == "wide":
            outs = [torch.cat([o, o], dim=-1) for o in outs]
        elif self.fault == "narrow":  # a projector one column short
            outs = [o[:, :-1] for o in outs]
        elif self.fault == "nan":
            outs[0][0, 0] = float("nan")
        elif self.fault == "none":
            return None
        elif self.fault == "raise":
            raise ValueError("the vision tower failed")
        if self.deepstack_visual_indexes:  # each row carries its deepstack levels
            outs = [o.repeat(1, 1 + len(self.deepstack_visual_indexes)) for o in outs]
        if self.per_item:
            return outs
        return torch.cat(outs)

    def forward(self, input_ids: torch.Tensor, forward_batch: ForwardBatch) -> Any:
        from sglang.srt.managers.mm_utils import general_mm_embed_routine

        extra = {"use_deepstack": {Modality.IMAGE: True}} if self.deepstack_visual_indexes else {}
        with torch.no_grad():
            return general_mm_embed_routine(
                input_ids=input_ids,
                forward_batch=forward_batch,
                language_model=self.language_model,
                multimodal_model=self,
                data_embedding_funcs={Modality.IMAGE: self.get_image_feature},
                **extra,
            )

    def separate_deepstack_embeds(self, embedding: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return embedding[:, :HIDDEN], embedding[:, HIDDEN:]


def prompt(
    rows: list[int],
    *,
    pad: int,
    one_item: bool = False,
    item_cls: type = MultimodalDataItem,
    marks: list[float] | None = None,
) -> tuple[list[int], MultimodalInputs]:
    """Text, then per image ``<start> pad×rows <end>``, then text. One item per image (0.5.x
    processors from 0.5.10), or one item holding every image (``one_item``, as before 0.5.10)."""
    ids = [1, 2, 3]
    runs = []
    for n in rows:
        ids.append(IM_START)
        runs.append((len(ids), len(ids) + n - 1))
        ids += [0] * n
        ids.append(IM_END)
    ids += [7, 8]
    marks = marks or [float(pad + i) for i in range(len(rows))]
    feats = [torch.full((n, 1), m) for n, m in zip(rows, marks, strict=True)]
    if one_item:
        groups = [(list(range(len(rows))), pad)]
    else:
        groups = [([i], pad + i) for i in range(len(rows))]
    items = []
    for images, value in groups:
        for i in images:
            start, end = runs[i]
            ids[start : end + 1] = [value] * (end - start + 1)
        items.append(
            item_cls(
                modality=Modality.IMAGE,
                hash=value * 7919,
                pad_value=value,
                offsets=[runs[i] for i in images],
                feature=[feats[i] for i in images],
            )
        )
    return ids, MultimodalInputs(mm_items=items)


def batch(
    requests: list[tuple[list[int], MultimodalInputs | None]], prefix: list[int] | None = None
) -> tuple[torch.Tensor, ForwardBatch]:
    """The forward batch of an extend step: each request's tokens from its prefix on."""
    prefix = prefix or [0] * len(requests)
    ids: list[int] = []
    seq = []
    for (tokens, _), p in zip(requests, prefix, strict=True):
        ids += tokens[p:]
        seq.append(len(tokens) - p)
    fb = ForwardBatch(
        forward_mode=ForwardMode.EXTEND,
        mm_inputs=[mm for _, mm in requests],
        extend_prefix_lens_cpu=list(prefix),
        extend_seq_lens_cpu=seq,
    )
    return torch.tensor(ids, dtype=torch.int64), fb
