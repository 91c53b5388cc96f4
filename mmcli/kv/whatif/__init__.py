"""What-if planning: the GPU table and KV-memory estimate, ``--max-model-len auto``, ``--sweep``."""
