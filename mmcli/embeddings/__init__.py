"""Multimodal embeddings in memory: the engine's ops, a fast path, ranges and the diagnosis."""
