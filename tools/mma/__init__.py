"""The tensor-core accumulation model (mma_model) and its H200 probe (mma_probe_device)."""
