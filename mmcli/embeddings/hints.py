"""How mmcli words the likely causes of what the diagnosis finds (the hints of its findings)."""

from __future__ import annotations

from collections.abc import Sequence

BLAME = "the model's get_multimodal_embeddings / embed_multimodal"


def count_hint(found: int, expected: int) -> str:
    """The likely causes of ``found`` items where ``expected`` were expected."""
    causes: list[str] = []
    if found == 0:
        causes.append("the encoder returned nothing: is the image/audio input reaching the model?")
    elif found == 1 and expected > 1:
        causes.append(
            f"one item where {expected} were expected: were the items batched into one tensor "
            "or concatenated?"
        )
    elif found > expected and expected > 0 and found >= 4 * expected:
        causes.append(
            "far more items than expected: tokens flattened into items (a 2-D tensor returned "
            "where a list of per-item tensors was expected)?"
        )
    if abs(found - expected) == 1:
        causes.append(
            "off by one: an item dropped or duplicated, or the prompt/model emitting the "
            "placeholder token itself"
        )
    causes.append(f"{BLAME} must return one tensor per multimodal item in the prompt")
    return "; ".join(causes)


def ndim_hint(shape: Sequence[int]) -> str:
    """The likely cause of an item that is not 2-D ``(num_embeds, hidden)``."""
    if len(shape) == 3 and shape[0] == 1:
        return "batch dim kept: the item is (1, tokens, hidden); drop it with .squeeze(0)"
    if len(shape) == 3:
        return (
            "a 3-D item: several items stacked in one, or a (rows, cols, hidden) grid; split it "
            "per item or flatten to (tokens, hidden)"
        )
    if len(shape) == 4:
        return (
            "spatial grid not flattened: reshape (…, h, w, hidden) to (tokens, hidden), "
            "e.g. .flatten(0, -2)"
        )
    if len(shape) == 1:
        return (
            "pooled output: one vector per item instead of one row per token; return the "
            "per-token features, not the pooled ones"
        )
    if len(shape) == 0:
        return "a scalar: the encoder output was reduced to one number"
    return "reshape the item to (tokens, hidden)"
