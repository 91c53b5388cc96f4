"""mmcli: diagnostics for multimodal embedding merges and cross-layer KV-cache sharing."""
