"""Read a Hugging Face ``config.json`` as the engine does: keys, layer layout, states, sharing."""
